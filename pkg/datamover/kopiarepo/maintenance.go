package kopiarepo

import (
	"context"
	"fmt"
	"time"

	"github.com/kopia/kopia/repo"
	"github.com/kopia/kopia/repo/maintenance"
	"github.com/kopia/kopia/snapshot/snapshotmaintenance"
)

// Maintenance is how a repository's maintenance runs.
type Maintenance struct {
	// FullInterval is the time between full maintenances (kopia's full
	// cycle; 0: kopia's default, a day). A shorter one than the
	// repository has takes effect at once: the next full maintenance is
	// due no later than FullInterval from now.
	FullInterval time.Duration
	// Unsafe uses kopia's SafetyNone: a full maintenance frees the data
	// of forgotten snapshots at once, which is safe only while nothing
	// else writes the repository. Otherwise kopia's SafetyFull, as
	// Velero runs it: safe beside uploads, the space freed over the next
	// full maintenances a day or more apart.
	Unsafe bool
}

// Maintain runs the maintenance kopia's schedule says is due, as Velero's
// maintenance job does (kopia's automatic mode): a quick one (index
// compaction), or a full one (snapshot garbage collection, then short
// packs rewritten, deleted contents dropped and unreferenced packs
// deleted). It returns the mode that ran (maintenance.ModeNone: none was
// due).
func (r *Repository) Maintain(ctx context.Context, m Maintenance) (maintenance.Mode, error) {
	dr, ok := r.rep.(repo.DirectRepository)
	if !ok {
		return maintenance.ModeNone, fmt.Errorf("the repository is not a direct repository")
	}
	safety := maintenance.SafetyFull
	if m.Unsafe {
		safety = maintenance.SafetyNone
	}
	mode := maintenance.ModeNone
	err := repo.DirectWriteSession(ctx, dr, repo.WriteSessionOptions{Purpose: "maintenance"}, func(ctx context.Context, w repo.DirectRepositoryWriter) error {
		p, err := maintenance.GetParams(ctx, w)
		if err != nil {
			return fmt.Errorf("reading the maintenance parameters: %w", err)
		}
		if m.FullInterval > 0 && p.FullCycle.Interval != m.FullInterval {
			if err := setFullInterval(ctx, w, p, m.FullInterval); err != nil {
				return err
			}
		}
		if mode, err = due(ctx, w, p); err != nil || mode == maintenance.ModeNone {
			return err
		}
		return snapshotmaintenance.Run(ctx, w, mode, false, safety)
	})
	if err != nil {
		return maintenance.ModeNone, fmt.Errorf("maintenance (%s): %w", mode, err)
	}
	return mode, nil
}

// due is the maintenance kopia's schedule says is due, as kopia decides
// it in its automatic mode.
func due(ctx context.Context, w repo.DirectRepositoryWriter, p *maintenance.Params) (maintenance.Mode, error) {
	s, err := maintenance.GetSchedule(ctx, w)
	if err != nil {
		return maintenance.ModeNone, fmt.Errorf("reading the maintenance schedule: %w", err)
	}
	now := w.Time()
	switch {
	case p.FullCycle.Enabled && !now.Before(s.NextFullMaintenanceTime):
		return maintenance.ModeFull, nil
	case p.QuickCycle.Enabled && !now.Before(s.NextQuickMaintenanceTime):
		return maintenance.ModeQuick, nil
	}
	return maintenance.ModeNone, nil
}

// setFullInterval sets the full cycle's interval, and brings the next
// full maintenance forward to at most interval from now.
func setFullInterval(ctx context.Context, w repo.DirectRepositoryWriter, p *maintenance.Params, interval time.Duration) error {
	p.FullCycle.Interval = interval
	if err := maintenance.SetParams(ctx, w, p); err != nil {
		return fmt.Errorf("setting the full maintenance interval: %w", err)
	}
	s, err := maintenance.GetSchedule(ctx, w)
	if err != nil {
		return fmt.Errorf("reading the maintenance schedule: %w", err)
	}
	if next := w.Time().Add(interval); s.NextFullMaintenanceTime.After(next) {
		s.NextFullMaintenanceTime = next
		if err := maintenance.SetSchedule(ctx, w, s); err != nil {
			return fmt.Errorf("writing the maintenance schedule: %w", err)
		}
	}
	return nil
}
