package v2alpha1

import "github.com/backstop-io/backstop/pkg/apis/lifecycle"

// The lives of DataUploads and DataDownloads: Velero's phases, the same for
// both, and the transition tables the registry enforces (docs/lifecycle.md
// shows them). Registry, engines and tests use these and define none of
// their own.

// EngineDataMover is the engine, by its --disable-controllers name, that
// moves volume data: it runs where the CSI driver's node service is
// reachable and writes the phases of both kinds.
const EngineDataMover = "data-mover"

// DataUploadLifecycle is the life of a DataUpload. The backup that needs
// it creates it (no phase); a data mover takes it, prepares the volume
// (a claim made from the snapshot, published in a private directory),
// uploads its files and ends it. spec.cancel before the upload runs ends it
// Canceled at once; while it runs, Canceling until the upload has stopped.
var DataUploadLifecycle = lifecycle.Table[DataUploadPhase]{
	Kind: "DataUpload",
	Phases: []DataUploadPhase{"", DataUploadPhaseNew, DataUploadPhaseAccepted, DataUploadPhasePrepared, DataUploadPhaseInProgress,
		DataUploadPhaseCanceling, DataUploadPhaseCanceled, DataUploadPhaseCompleted, DataUploadPhaseFailed},
	Terminal: []DataUploadPhase{DataUploadPhaseCanceled, DataUploadPhaseCompleted, DataUploadPhaseFailed},
	Transitions: []lifecycle.Transition[DataUploadPhase]{
		{From: lifecycle.From[DataUploadPhase]("", DataUploadPhaseNew), To: DataUploadPhaseAccepted, By: EngineDataMover,
			When: "a data mover of a node that reaches the snapshot's driver takes it"},
		{From: lifecycle.From(DataUploadPhaseAccepted), To: DataUploadPhasePrepared, By: EngineDataMover,
			When: "a claim made from the snapshot is published in a private directory"},
		{From: lifecycle.From(DataUploadPhasePrepared), To: DataUploadPhaseInProgress, By: EngineDataMover,
			When: "its files are being uploaded into the repository"},
		{From: lifecycle.From(DataUploadPhaseInProgress), To: DataUploadPhaseCompleted, By: EngineDataMover,
			When: "the repository holds the volume's snapshot (status.snapshotID)"},
		{From: lifecycle.From(DataUploadPhaseInProgress), To: DataUploadPhaseCanceling, By: EngineDataMover,
			When: "spec.cancel is set while the upload runs"},
		{From: lifecycle.From[DataUploadPhase]("", DataUploadPhaseNew, DataUploadPhaseAccepted, DataUploadPhasePrepared, DataUploadPhaseInProgress, DataUploadPhaseCanceling),
			To: DataUploadPhaseCanceled, By: EngineDataMover,
			When: "cancelled: the upload has stopped (one no process runs any more, after a restart, at once) and the repository holds nothing of it; an upload that ends while Canceling ends Canceled"},
		{From: lifecycle.From[DataUploadPhase]("", DataUploadPhaseNew, DataUploadPhaseAccepted, DataUploadPhasePrepared, DataUploadPhaseInProgress, DataUploadPhaseCanceling),
			To: DataUploadPhaseFailed, By: EngineDataMover,
			When: "it could not be done, or spec.operationTimeout passed (status.message says why)"},
	},
}

// Terminal reports whether a DataUpload has ended.
func (p DataUploadPhase) Terminal() bool { return DataUploadLifecycle.IsTerminal(p) }

// DataDownloadLifecycle is the life of a DataDownload: as a DataUpload's,
// the other way (the restore creates it; the data mover writes the
// repository's snapshot into a new claim).
var DataDownloadLifecycle = lifecycle.Table[DataDownloadPhase]{
	Kind: "DataDownload",
	Phases: []DataDownloadPhase{"", DataDownloadPhaseNew, DataDownloadPhaseAccepted, DataDownloadPhasePrepared, DataDownloadPhaseInProgress,
		DataDownloadPhaseCanceling, DataDownloadPhaseCanceled, DataDownloadPhaseCompleted, DataDownloadPhaseFailed},
	Terminal: []DataDownloadPhase{DataDownloadPhaseCanceled, DataDownloadPhaseCompleted, DataDownloadPhaseFailed},
	Transitions: []lifecycle.Transition[DataDownloadPhase]{
		{From: lifecycle.From[DataDownloadPhase]("", DataDownloadPhaseNew), To: DataDownloadPhaseAccepted, By: EngineDataMover,
			When: "a data mover of a node that reaches the target claim's driver takes it"},
		{From: lifecycle.From(DataDownloadPhaseAccepted), To: DataDownloadPhasePrepared, By: EngineDataMover,
			When: "the new claim is provisioned and published in a private directory"},
		{From: lifecycle.From(DataDownloadPhasePrepared), To: DataDownloadPhaseInProgress, By: EngineDataMover,
			When: "the snapshot's files are being written into it"},
		{From: lifecycle.From(DataDownloadPhaseInProgress), To: DataDownloadPhaseCompleted, By: EngineDataMover,
			When: "the claim holds the snapshot's files"},
		{From: lifecycle.From(DataDownloadPhaseInProgress), To: DataDownloadPhaseCanceling, By: EngineDataMover,
			When: "spec.cancel is set while the download runs"},
		{From: lifecycle.From[DataDownloadPhase]("", DataDownloadPhaseNew, DataDownloadPhaseAccepted, DataDownloadPhasePrepared, DataDownloadPhaseInProgress, DataDownloadPhaseCanceling),
			To: DataDownloadPhaseCanceled, By: EngineDataMover,
			When: "cancelled: the download has stopped (one no process runs any more, after a restart, at once); a download that ends while Canceling ends Canceled"},
		{From: lifecycle.From[DataDownloadPhase]("", DataDownloadPhaseNew, DataDownloadPhaseAccepted, DataDownloadPhasePrepared, DataDownloadPhaseInProgress, DataDownloadPhaseCanceling),
			To: DataDownloadPhaseFailed, By: EngineDataMover,
			When: "it could not be done, or spec.operationTimeout passed (status.message says why)"},
	},
}

// Terminal reports whether a DataDownload has ended.
func (p DataDownloadPhase) Terminal() bool { return DataDownloadLifecycle.IsTerminal(p) }
