package validation

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/backstop-io/backstop/pkg/apis/oadp"
)

// Defaults of the DataProtectionApplication's spec.nonAdmin.tenantLimits:
// what one tenant namespace may ask of the server unless the admin says
// otherwise.
const (
	DefaultMinValidationFrequency   = time.Minute
	DefaultMinScheduleInterval      = 15 * time.Minute
	DefaultMaxBackupsPerNamespace   = 1000
	DefaultMaxRestoresPerNamespace  = 100
	DefaultMaxSchedulesPerNamespace = 10
	DefaultMaxLocationsPerNamespace = 5
	// DefaultMaxDownloadRequestsPerNamespace bounds the requests a
	// namespace holds (each goes when its link expires).
	DefaultMaxDownloadRequestsPerNamespace = 100
	// VirtualMachineBackups and their trackers are created by a
	// namespace's users directly (edit), not through NonAdmin kinds.
	DefaultMaxVirtualMachineBackupsPerNamespace        = 1000
	DefaultMaxVirtualMachineBackupTrackersPerNamespace = 200
)

// Limits are the tenant limits in effect.
type Limits struct {
	MinValidationFrequency                                                            time.Duration
	MinScheduleInterval                                                               time.Duration
	MaxBackupsPerNamespace, MaxRestoresPerNamespace, MaxSchedulesPerNamespace         int
	MaxLocationsPerNamespace, MaxDownloadRequestsPerNamespace                         int
	MaxVirtualMachineBackupsPerNamespace, MaxVirtualMachineBackupTrackersPerNamespace int
}

// Limits returns the policy's tenant limits, defaults filled in.
func (p *Policy) Limits() Limits {
	l := Limits{DefaultMinValidationFrequency, DefaultMinScheduleInterval,
		DefaultMaxBackupsPerNamespace, DefaultMaxRestoresPerNamespace, DefaultMaxSchedulesPerNamespace,
		DefaultMaxLocationsPerNamespace, DefaultMaxDownloadRequestsPerNamespace,
		DefaultMaxVirtualMachineBackupsPerNamespace, DefaultMaxVirtualMachineBackupTrackersPerNamespace}
	if p == nil || p.NonAdmin == nil || p.NonAdmin.TenantLimits == nil {
		return l
	}
	t := p.NonAdmin.TenantLimits
	if t.MinValidationFrequency != nil {
		l.MinValidationFrequency = t.MinValidationFrequency.Duration
	}
	if t.MinScheduleInterval != nil {
		l.MinScheduleInterval = t.MinScheduleInterval.Duration
	}
	for _, f := range []struct {
		from *int32
		to   *int
	}{{t.MaxBackupsPerNamespace, &l.MaxBackupsPerNamespace}, {t.MaxRestoresPerNamespace, &l.MaxRestoresPerNamespace}, {t.MaxSchedulesPerNamespace, &l.MaxSchedulesPerNamespace},
		{t.MaxLocationsPerNamespace, &l.MaxLocationsPerNamespace}, {t.MaxDownloadRequestsPerNamespace, &l.MaxDownloadRequestsPerNamespace},
		{t.MaxVirtualMachineBackupsPerNamespace, &l.MaxVirtualMachineBackupsPerNamespace},
		{t.MaxVirtualMachineBackupTrackersPerNamespace, &l.MaxVirtualMachineBackupTrackersPerNamespace}} {
		if f.from != nil {
			*f.to = int(*f.from)
		}
	}
	return l
}

// validateTenantLimits checks the admin's limits: none negative.
func validateTenantLimits(t *oadp.TenantLimits, path *field.Path) field.ErrorList {
	if t == nil {
		return nil
	}
	var errs field.ErrorList
	for name, d := range map[string]*time.Duration{"minValidationFrequency": durationOf(t.MinValidationFrequency), "minScheduleInterval": durationOf(t.MinScheduleInterval)} {
		if d != nil && *d < 0 {
			errs = append(errs, field.Invalid(path.Child(name), d.String(), "must not be negative"))
		}
	}
	for name, n := range map[string]*int32{"maxBackupsPerNamespace": t.MaxBackupsPerNamespace, "maxRestoresPerNamespace": t.MaxRestoresPerNamespace, "maxSchedulesPerNamespace": t.MaxSchedulesPerNamespace,
		"maxLocationsPerNamespace": t.MaxLocationsPerNamespace, "maxDownloadRequestsPerNamespace": t.MaxDownloadRequestsPerNamespace,
		"maxVirtualMachineBackupsPerNamespace": t.MaxVirtualMachineBackupsPerNamespace, "maxVirtualMachineBackupTrackersPerNamespace": t.MaxVirtualMachineBackupTrackersPerNamespace} {
		if n != nil && *n < 0 {
			errs = append(errs, field.Invalid(path.Child(name), *n, "must not be negative"))
		}
	}
	return errs
}

// ValidateValidationFrequency refuses a tenant location's
// validationFrequency shorter than the limit (0, the location's default, is
// allowed).
func ValidateValidationFrequency(d time.Duration, l Limits, path *field.Path, dpa string) field.ErrorList {
	if d <= 0 || d >= l.MinValidationFrequency {
		return nil
	}
	return field.ErrorList{field.Invalid(path, d.String(), fmt.Sprintf("must be %s or more (the administrator's tenantLimits.minValidationFrequency%s)", l.MinValidationFrequency, inDPA(dpa)))}
}

// ValidateScheduleInterval refuses a tenant's cron schedule whose runs come
// closer than the limit: the shortest gap between its runs over a year.
func ValidateScheduleInterval(schedule string, l Limits, path *field.Path, dpa string) field.ErrorList {
	gap, ok := shortestGap(schedule)
	if !ok || gap >= l.MinScheduleInterval {
		return nil
	}
	return field.ErrorList{field.Invalid(path, schedule, fmt.Sprintf("runs %s apart at the closest; the shortest interval allowed is %s (the administrator's tenantLimits.minScheduleInterval%s)",
		gap, l.MinScheduleInterval, inDPA(dpa)))}
}

// shortestGap is the shortest time between two runs of a cron schedule,
// over its runs of a year from a fixed day (at most 100,000 runs: a
// schedule running more often than that is as short as its first gaps
// say); false when it does not parse.
func shortestGap(schedule string) (time.Duration, bool) {
	s, err := cron.ParseStandard(schedule)
	if err != nil {
		return 0, false
	}
	start := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(1, 0, 0)
	prev, shortest := s.Next(start), time.Duration(-1)
	for i := 0; i < 100_000 && !prev.IsZero() && prev.Before(end); i++ {
		next := s.Next(prev)
		if next.IsZero() {
			break
		}
		if gap := next.Sub(prev); shortest < 0 || gap < shortest {
			shortest = gap
		}
		prev = next
	}
	return shortest, shortest >= 0
}

// CheckCount refuses one more object of kind in a namespace holding n
// (the limit is max; 0: none).
func CheckCount(kind string, n, max int, path *field.Path, dpa string) field.ErrorList {
	if max <= 0 || n < max {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf("the namespace holds %d %ss, the most the administrator allows (tenantLimits%s): delete some first", n, kind, inDPA(dpa)))}
}

func inDPA(dpa string) string {
	if dpa == "" {
		return ", by default"
	}
	return " of DataProtectionApplication " + dpa
}

func durationOf(d *metav1.Duration) *time.Duration {
	if d == nil {
		return nil
	}
	v := d.Duration
	return &v
}
