package backuprepo

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kopia/kopia/repo/maintenance"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	velerovalidation "github.com/backstop-io/backstop/pkg/apis/velero/validation"
	"github.com/backstop-io/backstop/pkg/datamover/kopiarepo"
	"github.com/backstop-io/backstop/pkg/engine/enginetest"
	"github.com/backstop-io/backstop/pkg/engine/status"
)

// fakeRepository records the maintenances asked of it.
type fakeRepository struct {
	mode  maintenance.Mode
	err   error
	asked []kopiarepo.Maintenance
}

func (f *fakeRepository) Maintain(_ context.Context, m kopiarepo.Maintenance) (maintenance.Mode, error) {
	f.asked = append(f.asked, m)
	return f.mode, f.err
}

// TestControllerSync: a repository is set up (Ready, or NotReady with the
// reason and not maintained); its maintenance runs when its frequency has
// passed since the last run (a failed one included), with the maintenance
// its spec.repositoryConfig asks for; each run is recorded (the last three
// kept), a success as the last maintenance time.
func TestControllerSync(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	run := func(start time.Duration, result velerov1.BackupRepositoryMaintenanceResult) velerov1.BackupRepositoryMaintenanceStatus {
		return velerov1.BackupRepositoryMaintenanceStatus{Result: result, StartTimestamp: at(start), CompleteTimestamp: at(start + time.Second)}
	}
	repository := func(config map[string]string, st velerov1.BackupRepositoryStatus) *velerov1.BackupRepository {
		return &velerov1.BackupRepository{
			ObjectMeta: metav1.ObjectMeta{Name: Name("shop", "default"), Namespace: "velero"},
			Spec: velerov1.BackupRepositorySpec{VolumeNamespace: "shop", BackupStorageLocation: "default", RepositoryType: RepositoryType,
				MaintenanceFrequency: metav1.Duration{Duration: time.Hour}, RepositoryConfig: config},
			Status: st,
		}
	}
	ok, failed := velerov1.BackupRepositoryMaintenanceSucceeded, velerov1.BackupRepositoryMaintenanceFailed
	for _, tc := range []struct {
		name     string
		repo     *velerov1.BackupRepository
		repoMode maintenance.Mode
		repoErr  error
		// openErr is the repository's setting up's.
		openErr   error
		wantAsked []kopiarepo.Maintenance
		// wantRuns are the results of status.recentMaintenance after;
		// wantMessage is in the last one's message.
		wantRuns    []velerov1.BackupRepositoryMaintenanceResult
		wantMessage string
		wantLast    *metav1.Time
	}{
		{name: "never maintained: at once, kopia's defaults", repo: repository(nil, velerov1.BackupRepositoryStatus{}), repoMode: maintenance.ModeFull,
			wantAsked: []kopiarepo.Maintenance{{}}, wantRuns: []velerov1.BackupRepositoryMaintenanceResult{ok}, wantMessage: "full maintenance", wantLast: at(0)},
		{name: "maintained less than its frequency ago: not yet",
			repo:     repository(nil, velerov1.BackupRepositoryStatus{LastMaintenanceTime: at(-59 * time.Minute), RecentMaintenance: []velerov1.BackupRepositoryMaintenanceStatus{run(-59*time.Minute, ok)}}),
			wantRuns: []velerov1.BackupRepositoryMaintenanceResult{ok}, wantLast: at(-59 * time.Minute)},
		{name: "failed less than its frequency ago: not yet",
			repo:     repository(nil, velerov1.BackupRepositoryStatus{LastMaintenanceTime: at(-3 * time.Hour), RecentMaintenance: []velerov1.BackupRepositoryMaintenanceStatus{run(-3*time.Hour, ok), run(-time.Minute, failed)}}),
			wantRuns: []velerov1.BackupRepositoryMaintenanceResult{ok, failed}, wantLast: at(-3 * time.Hour)},
		{name: "due: the config's interval and safety; three runs kept",
			repo: repository(map[string]string{velerovalidation.RepositoryConfigFullMaintenanceInterval: "eagerGC", velerovalidation.RepositoryConfigMaintenanceSafety: "none"},
				velerov1.BackupRepositoryStatus{LastMaintenanceTime: at(-3 * time.Hour), RecentMaintenance: []velerov1.BackupRepositoryMaintenanceStatus{
					run(-5*time.Hour, failed), run(-4*time.Hour, ok), run(-3*time.Hour, ok)}}),
			repoMode: maintenance.ModeQuick, wantAsked: []kopiarepo.Maintenance{{FullInterval: 6 * time.Hour, Unsafe: true}},
			wantRuns: []velerov1.BackupRepositoryMaintenanceResult{ok, ok, ok}, wantMessage: "quick maintenance (full every 6h0m0s, safety none)", wantLast: at(0)},
		{name: "nothing due: a success all the same", repo: repository(nil, velerov1.BackupRepositoryStatus{LastMaintenanceTime: at(-time.Hour)}), repoMode: maintenance.ModeNone,
			wantAsked: []kopiarepo.Maintenance{{}}, wantRuns: []velerov1.BackupRepositoryMaintenanceResult{ok}, wantMessage: "no maintenance due", wantLast: at(0)},
		{name: "a failure is recorded with its reason, the last success kept",
			repo:    repository(nil, velerov1.BackupRepositoryStatus{LastMaintenanceTime: at(-2 * time.Hour)}),
			repoErr: errors.New("the bucket is gone"), wantAsked: []kopiarepo.Maintenance{{}},
			wantRuns: []velerov1.BackupRepositoryMaintenanceResult{failed}, wantMessage: "the bucket is gone", wantLast: at(-2 * time.Hour)},
		{name: "a repository that does not open: NotReady with the reason, not maintained",
			repo:    repository(nil, velerov1.BackupRepositoryStatus{LastMaintenanceTime: at(-2 * time.Hour)}),
			openErr: errors.New("the password of Secret velero-repo-credentials does not open it"), wantLast: at(-2 * time.Hour)},
		{name: "a config it cannot read: failed with the field, the repository left alone",
			repo:     repository(map[string]string{velerovalidation.RepositoryConfigMaintenanceSafety: "sometimes"}, velerov1.BackupRepositoryStatus{}),
			wantRuns: []velerov1.BackupRepositoryMaintenanceResult{failed}, wantMessage: "spec.repositoryConfig[maintenanceSafety]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			w := enginetest.New(t, tc.repo)
			var told []bool
			repos := New(Config{Client: w.Client, Namespace: "velero", Status: status.Writer{Engine: ControllerName},
				Maintained: func(repository string, succeeded bool, _ time.Duration) {
					if repository != tc.repo.Name {
						t.Errorf("maintenance of %s told, want %s", repository, tc.repo.Name)
					}
					told = append(told, succeeded)
				}})
			c, err := NewController(repos, w.Factory.Velero().V1().BackupRepositories(), clocktesting.NewFakeClock(now))
			if err != nil {
				t.Fatal(err)
			}
			fake := &fakeRepository{mode: tc.repoMode, err: tc.repoErr}
			released := 0
			c.setUp = func(_ context.Context, br *velerov1.BackupRepository) (maintainer, func(), error) {
				if br.Name != tc.repo.Name {
					t.Errorf("set up %s", br.Name)
				}
				if tc.openErr != nil {
					return nil, nil, tc.openErr
				}
				return fake, func() { released++ }, nil
			}
			if err := c.sync(ctx, cache.ObjectName{Namespace: "velero", Name: tc.repo.Name}); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 0, false: 1}[tc.openErr != nil]; released != want {
				t.Errorf("the repository released %d times, want %d", released, want)
			}
			if len(fake.asked) != len(tc.wantAsked) || (len(fake.asked) == 1 && fake.asked[0] != tc.wantAsked[0]) {
				t.Errorf("maintenances asked %+v, want %+v", fake.asked, tc.wantAsked)
			}
			got, err := w.Client.VeleroV1().BackupRepositories("velero").Get(ctx, tc.repo.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantPhase, wantMessage := velerov1.BackupRepositoryPhaseReady, ""
			if tc.openErr != nil {
				wantPhase, wantMessage = velerov1.BackupRepositoryPhaseNotReady, tc.openErr.Error()
			}
			if got.Status.Phase != wantPhase || got.Status.Message != wantMessage {
				t.Errorf("phase %s (%q), want %s (%q)", got.Status.Phase, got.Status.Message, wantPhase, wantMessage)
			}
			var results []velerov1.BackupRepositoryMaintenanceResult
			for _, r := range got.Status.RecentMaintenance {
				results = append(results, r.Result)
			}
			// Each run this pass made is told (for the metrics), once.
			ran := len(fake.asked) > 0 || tc.wantMessage == "spec.repositoryConfig[maintenanceSafety]"
			if want := ran; (len(told) == 1) != want || len(told) > 1 {
				t.Errorf("maintenances told %v, want one: %v", told, want)
			} else if ran && told[0] != (results[len(results)-1] == ok) {
				t.Errorf("maintenance told succeeded=%v, the run recorded %s", told[0], results[len(results)-1])
			}
			if strings.Join(toStrings(results), ",") != strings.Join(toStrings(tc.wantRuns), ",") {
				t.Errorf("recent maintenance %v, want %v", results, tc.wantRuns)
			}
			if n := len(got.Status.RecentMaintenance); tc.wantMessage != "" && (n == 0 || !strings.Contains(got.Status.RecentMaintenance[n-1].Message, tc.wantMessage)) {
				t.Errorf("recent maintenance %+v, want the last saying %q", got.Status.RecentMaintenance, tc.wantMessage)
			}
			if !got.Status.LastMaintenanceTime.Equal(tc.wantLast) {
				t.Errorf("last maintenance %v, want %v", got.Status.LastMaintenanceTime, tc.wantLast)
			}
		})
	}
}

func toStrings(results []velerov1.BackupRepositoryMaintenanceResult) []string {
	out := make([]string, len(results))
	for i, r := range results {
		out[i] = string(r)
	}
	return out
}
