package virt

import "context"

// Hypervisor is what the engines ask of libvirt. *Conn is the real one;
// the engines' unit tests give them a fake, so that their decisions are
// tested without a daemon (their behaviour on libvirt is tested against a
// real one).
type Hypervisor interface {
	// Domains and disks.
	DomainNames() ([]string, error)
	Disks(domain string) ([]Disk, error)
	Active(domain string) (bool, error)
	Versions() (libvirtVersion, qemuVersion string, err error)

	// Backup jobs.
	PushBackup(ctx context.Context, req BackupRequest, progress func(Progress)) (BackupResult, error)
	FullBackupPull(ctx context.Context, req BackupRequest, rateLimit int64, progress func(Progress)) (BackupResult, error)
	AbortJob(ctx context.Context, domain string) error
	CopyStopped(ctx context.Context, req BackupRequest, progress func(Progress)) (BackupResult, error)

	// Restores.
	DomainDefinition(domain string) (string, error)
	StopForRestore(ctx context.Context, domain string) (wasActive bool, err error)
	StartDomain(domain string) error
	DefineFrom(definition, name string, disks map[string]string) error
	GrantImage(image string) error

	// Checkpoints.
	CheckpointXML(domain, name string) (string, error)
	CheckpointSize(domain, name string) (uint64, error)
	VerifyCheckpoint(domain, name, savedXML string) error
	RemoveStaleCheckpoint(domain, name, savedXML string) error
	DeleteCheckpoint(domain, name string) error
	DeleteCheckpoints(ctx context.Context, domain string, names []string) error

	// Changed block tracking.
	CBTStatus(domain, stateDir string) (CBTState, error)
	EnableCBT(domain, stateDir string) (CBTState, error)
	DisableCBT(domain, stateDir string) (CBTState, error)

	// Events.
	OnLifecycle(fn func(domain string)) (stop func())
	OnReconnect(fn func()) (stop func())
}

var _ Hypervisor = &Conn{}
