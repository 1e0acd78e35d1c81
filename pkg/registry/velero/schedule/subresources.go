package schedule

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/clock"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
	"github.com/backstop-io/backstop/pkg/registry/resource"
)

// BackupName is the name of the backup a schedule runs at now:
// "<schedule>-<yyyyMMddHHmmss>" in UTC, as Velero names them.
func BackupName(schedule string, now time.Time) string {
	return schedule + "-" + now.UTC().Format("20060102150405")
}

// NewBackup is the backup a schedule runs at now: its template's spec;
// the template's labels (the schedule's when the template has none) plus
// velero.io/schedule-name; the schedule's annotations; and, with
// useOwnerReferencesInBackup, the schedule as its controller owner.
func NewBackup(s *velero.Schedule, now time.Time) *velero.Backup {
	b := &velero.Backup{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: BackupName(s.Name, now), Labels: map[string]string{}},
		Spec:       *s.Spec.Template.DeepCopy(),
	}
	from := s.Spec.Template.Metadata.Labels
	if len(from) == 0 {
		from = s.Labels
	}
	for k, v := range from {
		b.Labels[k] = v
	}
	b.Labels[velerov1.ScheduleNameLabel] = velerov1.LabelValue(s.Name)
	if len(s.Annotations) > 0 {
		b.Annotations = make(map[string]string, len(s.Annotations))
		for k, v := range s.Annotations {
			b.Annotations[k] = v
		}
	}
	if s.Spec.UseOwnerReferencesInBackup != nil && *s.Spec.UseOwnerReferencesInBackup {
		controller := true
		b.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: velerov1.SchemeGroupVersion.String(), Kind: "Schedule", Name: s.Name, UID: s.UID, Controller: &controller,
		}}
	}
	return b
}

// BackupStore is what the trigger needs of the backups' storage.
type BackupStore interface {
	rest.Lister
	rest.Creater
}

// Pending returns a backup of the schedule that has not finished, or nil.
func Pending(ctx context.Context, backups rest.Lister, schedule string) (*velero.Backup, error) {
	obj, err := backups.List(ctx, &metainternalversion.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{velerov1.ScheduleNameLabel: velerov1.LabelValue(schedule)}),
	})
	if err != nil {
		return nil, fmt.Errorf("listing the backups of schedule %s: %w", schedule, err)
	}
	for i := range obj.(*velero.BackupList).Items {
		b := &obj.(*velero.BackupList).Items[i]
		if !velerov1.BackupPhase(b.Status.Phase).Terminal() {
			return b, nil
		}
	}
	return nil, nil
}

// postOnly is a POST-only subresource answering with a schedule.
type postOnly struct{ resource.PostSubresource }

// New returns an empty schedule.
func (postOnly) New() runtime.Object { return &velero.Schedule{} }

// update changes a schedule through the store and answers with it.
func update(ctx context.Context, store *genericregistry.Store, name string, responder rest.Responder, mutate func(*velero.Schedule)) {
	resource.UpdateAndRespond(ctx, store, name, responder, func(obj runtime.Object) error {
		mutate(obj.(*velero.Schedule))
		return nil
	})
}

// PauseREST is schedules/<name>/pause: POST sets spec.paused.
type PauseREST struct {
	postOnly
	store *genericregistry.Store
}

var _ rest.Connecter = &PauseREST{}

// Connect pauses the schedule and returns it.
func (r *PauseREST) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	return http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		update(ctx, r.store, name, responder, func(s *velero.Schedule) { s.Spec.Paused = true })
	}), nil
}

// UnpauseOptions is the optional body of an unpause.
type UnpauseOptions struct {
	// SkipImmediately, when set, replaces spec.skipImmediately for this
	// unpause (velero schedule unpause --skip-immediately).
	SkipImmediately *bool `json:"skipImmediately,omitempty"`
}

// UnpauseREST is schedules/<name>/unpause: POST clears spec.paused; a
// body {"skipImmediately": true|false} sets spec.skipImmediately too.
type UnpauseREST struct {
	postOnly
	store *genericregistry.Store
}

var _ rest.Connecter = &UnpauseREST{}

// Connect unpauses the schedule and returns it.
func (r *UnpauseREST) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	return http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) {
		var opts UnpauseOptions
		body, err := io.ReadAll(io.LimitReader(req.Body, 64<<10))
		if err != nil {
			responder.Error(apierrors.NewBadRequest(fmt.Sprintf("reading the unpause body: %v", err)))
			return
		}
		if len(strings.TrimSpace(string(body))) > 0 {
			dec := json.NewDecoder(strings.NewReader(string(body)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&opts); err != nil {
				responder.Error(apierrors.NewBadRequest(fmt.Sprintf(`the unpause body must be {"skipImmediately": true|false}: %v`, err)))
				return
			}
		}
		update(ctx, r.store, name, responder, func(s *velero.Schedule) {
			s.Spec.Paused = false
			if opts.SkipImmediately != nil {
				v := *opts.SkipImmediately
				s.Spec.SkipImmediately = &v
			}
		})
	}), nil
}

// TriggerREST is schedules/<name>/trigger: POST creates a backup from the
// schedule now (named and labelled as the schedule's runs are) and answers
// with it; 409 Conflict while a backup of the schedule has not finished.
// It does not move the schedule's own runs (status.lastBackup). Paused
// schedules can be triggered.
type TriggerREST struct {
	resource.PostSubresource
	store   *genericregistry.Store
	backups BackupStore
	clock   clock.PassiveClock
}

var _ rest.Connecter = &TriggerREST{}

// New returns an empty backup: the answer is the backup created.
func (r *TriggerREST) New() runtime.Object { return &velero.Backup{} }

// Connect creates the backup.
func (r *TriggerREST) Connect(ctx context.Context, name string, _ runtime.Object, responder rest.Responder) (http.Handler, error) {
	return http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		obj, err := r.store.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			responder.Error(err)
			return
		}
		s := obj.(*velero.Schedule)
		pending, err := Pending(ctx, r.backups, s.Name)
		if err != nil {
			responder.Error(err)
			return
		}
		if pending != nil {
			phase := string(pending.Status.Phase)
			if phase == "" {
				phase = string(velerov1.BackupPhaseNew)
			}
			responder.Error(apierrors.NewConflict(velero.Resource("schedules"), s.Name,
				fmt.Errorf("backup %s of this schedule has not finished (%s)", pending.Name, phase)))
			return
		}
		created, err := r.backups.Create(ctx, NewBackup(s, r.clock.Now()), rest.ValidateAllObjectFunc, &metav1.CreateOptions{})
		if err != nil {
			responder.Error(err)
			return
		}
		responder.Object(http.StatusCreated, created)
	}), nil
}
