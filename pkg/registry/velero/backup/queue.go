package backup

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/backstop-io/backstop/pkg/apis/velero"
	velerov1 "github.com/backstop-io/backstop/pkg/apis/velero/v1"
)

// queued is the internal spelling of the Queued phase.
const queued = velero.BackupPhase(velerov1.BackupPhaseQueued)

// Queue positions are not stored. status.queuePosition is filled in when a
// backup is read (get, list, watch events as they are sent, write
// responses): the number of Queued backups with a smaller sequence, plus
// one. Dequeueing a backup therefore writes that backup only; the backups
// behind it move up without being rewritten, so draining N queued backups
// costs N writes, not N².

// QueueIndex orders the Queued backups of the admin namespace by sequence.
// The backup store's after-write hooks keep it current, so a read that
// starts after a write returned sees the new positions.
type QueueIndex struct {
	namespace string
	load      func(ctx context.Context) (*velero.BackupList, error)

	mu     sync.Mutex
	loaded bool
	seqOf  map[string]int64 // queued backup → sequence
	order  []int64          // the sequences of queued backups, sorted
	next   int64
}

// NewQueueIndex returns the index of namespace; load lists its backups.
func NewQueueIndex(namespace string, load func(ctx context.Context) (*velero.BackupList, error)) *QueueIndex {
	return &QueueIndex{namespace: namespace, load: load, seqOf: map[string]int64{}, next: 1}
}

// ensureLoaded fills the index from storage once. Called with mu held.
func (x *QueueIndex) ensureLoaded() error {
	if x.loaded {
		return nil
	}
	list, err := x.load(genericrequest.WithNamespace(context.Background(), x.namespace))
	if err != nil {
		return fmt.Errorf("loading the backup queue: %w", err)
	}
	for i := range list.Items {
		x.observeLocked(&list.Items[i])
	}
	x.loaded = true
	return nil
}

func sequenceOf(b *velero.Backup) (int64, bool) {
	s, ok := b.Annotations[velerov1.QueueSequenceAnnotation]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// observeLocked records b's current state.
func (x *QueueIndex) observeLocked(b *velero.Backup) {
	if b.Namespace != x.namespace {
		return
	}
	x.forgetLocked(b.Name)
	seq, ok := sequenceOf(b)
	if ok && seq >= x.next {
		x.next = seq + 1
	}
	if !ok || b.Status.Phase != queued || b.DeletionTimestamp != nil {
		return
	}
	x.seqOf[b.Name] = seq
	i := sort.Search(len(x.order), func(i int) bool { return x.order[i] >= seq })
	x.order = append(x.order, 0)
	copy(x.order[i+1:], x.order[i:])
	x.order[i] = seq
}

func (x *QueueIndex) forgetLocked(name string) {
	seq, ok := x.seqOf[name]
	if !ok {
		return
	}
	delete(x.seqOf, name)
	i := sort.Search(len(x.order), func(i int) bool { return x.order[i] >= seq })
	if i < len(x.order) && x.order[i] == seq {
		x.order = append(x.order[:i], x.order[i+1:]...)
	}
}

// Observe records a written backup (the store's after-write hooks).
func (x *QueueIndex) Observe(obj runtime.Object) {
	b, ok := obj.(*velero.Backup)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ensureLoaded() == nil {
		x.observeLocked(b)
	}
}

// Forget drops a deleted backup.
func (x *QueueIndex) Forget(obj runtime.Object) {
	b, ok := obj.(*velero.Backup)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.forgetLocked(b.Name)
}

// NextSequence hands out the sequence of a backup entering the queue.
func (x *QueueIndex) NextSequence() (int64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.ensureLoaded(); err != nil {
		return 0, err
	}
	seq := x.next
	x.next++
	return seq, nil
}

// fill sets status.queuePosition of a Backup or of the items of a
// BackupList: for a Queued backup, the number of queued sequences before
// its own, plus one.
func (x *QueueIndex) fill(obj runtime.Object) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ensureLoaded() != nil {
		return
	}
	set := func(b *velero.Backup) {
		b.Status.QueuePosition = 0
		if b.Status.Phase != queued || b.Namespace != x.namespace {
			return
		}
		// The backup's own sequence comes from the object read, so a read
		// racing with the hook that indexes this very write is still exact.
		seq, ok := sequenceOf(b)
		if !ok {
			return
		}
		b.Status.QueuePosition = sort.Search(len(x.order), func(i int) bool { return x.order[i] >= seq }) + 1
	}
	switch o := obj.(type) {
	case *velero.Backup:
		set(o)
	case *velero.BackupList:
		for i := range o.Items {
			set(&o.Items[i])
		}
	}
}

// Position is the queue position of the backup name of the index's
// namespace: 0 when it is not Queued.
func (x *QueueIndex) Position(name string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ensureLoaded() != nil {
		return 0
	}
	seq, ok := x.seqOf[name]
	if !ok {
		return 0
	}
	return sort.Search(len(x.order), func(i int) bool { return x.order[i] >= seq }) + 1
}
