package validation

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Keys of a BackupRepository's spec.repositoryConfig that its maintenance
// reads.
const (
	// RepositoryConfigFullMaintenanceInterval is Velero's key: the time
	// between full maintenances, normalGC (24h, kopia's default), fastGC
	// (12h) or eagerGC (6h); Backstop also takes a duration ("30m").
	RepositoryConfigFullMaintenanceInterval = "fullMaintenanceInterval"
	// RepositoryConfigMaintenanceSafety is Backstop's key: "full" (the
	// default, as Velero runs kopia's maintenance: safe beside uploads,
	// a forgotten snapshot's space freed over full maintenances a day or
	// more apart) or "none" (freed at the next full maintenance: for a
	// repository nothing else writes meanwhile).
	RepositoryConfigMaintenanceSafety = "maintenanceSafety"
)

// The values of RepositoryConfigFullMaintenanceInterval that Velero names.
var fullMaintenanceIntervals = map[string]time.Duration{
	"normalGC": 24 * time.Hour,
	"fastGC":   12 * time.Hour,
	"eagerGC":  6 * time.Hour,
}

// RepositoryMaintenance is what a BackupRepository's spec.repositoryConfig
// says of its maintenance.
type RepositoryMaintenance struct {
	// FullInterval is the time between full maintenances (0: kopia's).
	FullInterval time.Duration
	// Unsafe is maintenanceSafety "none".
	Unsafe bool
}

// ParseRepositoryMaintenance reads the maintenance keys of a
// spec.repositoryConfig (at fld); other keys are left to others.
func ParseRepositoryMaintenance(config map[string]string, fld *field.Path) (RepositoryMaintenance, field.ErrorList) {
	var out RepositoryMaintenance
	var errs field.ErrorList
	if v, ok := config[RepositoryConfigFullMaintenanceInterval]; ok {
		d, named := fullMaintenanceIntervals[v]
		if !named {
			var err error
			if d, err = time.ParseDuration(v); err != nil || d < time.Second {
				errs = append(errs, field.Invalid(fld.Key(RepositoryConfigFullMaintenanceInterval), v,
					"must be normalGC, fastGC, eagerGC or a duration of at least 1s (\"30m\")"))
			}
		}
		out.FullInterval = d
	}
	switch v := config[RepositoryConfigMaintenanceSafety]; v {
	case "", "full":
	case "none":
		out.Unsafe = true
	default:
		errs = append(errs, field.NotSupported(fld.Key(RepositoryConfigMaintenanceSafety), v, []string{"full", "none"}))
	}
	if errs != nil {
		return RepositoryMaintenance{}, errs
	}
	return out, nil
}

// String describes the maintenance as the status says it.
func (m RepositoryMaintenance) String() string {
	safety := "full"
	if m.Unsafe {
		safety = "none"
	}
	if m.FullInterval == 0 {
		return "safety " + safety
	}
	return fmt.Sprintf("full every %s, safety %s", m.FullInterval, safety)
}
