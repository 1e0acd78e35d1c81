package location

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

func TestUsageDue(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) []velerov1.LocationUsageSample {
		return []velerov1.LocationUsageSample{{Time: metav1.NewTime(t0.Add(-2 * time.Hour))}, {Time: metav1.NewTime(t0.Add(d))}}
	}
	for _, tc := range []struct {
		name     string
		usage    []velerov1.LocationUsageSample
		interval time.Duration
		want     bool
	}{
		{"never measured", nil, time.Hour, true},
		{"measuring off", nil, 0, false},
		{"the last sample is recent", at(-30 * time.Minute), time.Hour, false},
		{"the interval has just passed", at(-time.Hour), time.Hour, true},
		{"long ago", at(-5 * time.Hour), time.Hour, true},
		{"a sample from the future (a clock set back)", at(time.Minute), time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UsageDue(tc.usage, t0, tc.interval); got != tc.want {
				t.Errorf("UsageDue = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAddUsageSample(t *testing.T) {
	var usage []velerov1.LocationUsageSample
	for i := range velerov1.LocationUsageSamples + 5 {
		before := usage
		usage = AddUsageSample(usage, velerov1.LocationUsageSample{Bytes: int64(i)})
		if len(before) > 0 && &before[0] == &usage[0] {
			t.Fatal("the samples were changed in place (the informer's copy)")
		}
	}
	if len(usage) != velerov1.LocationUsageSamples || usage[0].Bytes != 5 || usage[len(usage)-1].Bytes != int64(velerov1.LocationUsageSamples+4) {
		t.Errorf("kept %d samples from %d to %d, want the last %d", len(usage), usage[0].Bytes, usage[len(usage)-1].Bytes, velerov1.LocationUsageSamples)
	}
}
