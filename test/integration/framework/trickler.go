package framework

import (
	"net/http"
	"sync/atomic"
	"time"
)

// Trickler is an S3 endpoint that holds whoever asks it: a HEAD is
// answered at once, every other request with its headers and then a byte
// a second for as long as the client reads (a tenant's endpoint that
// answers slowly). InFlight counts the requests it is holding.
type Trickler struct{ InFlight atomic.Int32 }

func (tr *Trickler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	tr.InFlight.Add(1)
	defer tr.InFlight.Add(-1)
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			if _, err := w.Write([]byte(" ")); err != nil {
				return
			}
		}
	}
}

// Tricklers are tricklers by owner (each tenant's endpoint).
type Tricklers map[string]*Trickler

// InFlight is how many requests they hold in all, and the most one of
// them holds.
func (ts Tricklers) InFlight() (all, most int32) {
	for _, tr := range ts {
		n := tr.InFlight.Load()
		all += n
		most = max(most, n)
	}
	return all, most
}
