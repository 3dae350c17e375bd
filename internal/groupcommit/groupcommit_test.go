package groupcommit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder is a Sender that records each signal's key, items and start, and answers with err.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	starts  []time.Time
	err     error
}

func (r *recorder) send(_ context.Context, _ string, items []int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, slices.Clone(items))
	r.starts = append(r.starts, time.Now())
	return r.err
}

// commitAll commits items 1..n from n goroutines, item i after i*spacing, and returns each
// caller's answer.
func commitAll(q *Queue[int], n int, spacing time.Duration) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * spacing)
			errs[i] = q.Commit(context.Background(), "pool", i+1)
		})
	}
	wg.Wait()
	return errs
}

// With a pace, a key's signals start at least a pace apart, the first at once, and together
// carry every item once, each caller's in the order it committed after the one before it.
func TestPacedSignalsCarryEveryItemAPaceApart(t *testing.T) {
	const pace = 200 * time.Millisecond
	r := &recorder{}
	q := New(r.send, Options{MaxBatch: 100, Hold: time.Minute, Pace: pace})
	for i, err := range commitAll(q, 20, 30*time.Millisecond) {
		if err != nil {
			t.Errorf("item %d: %v", i+1, err)
		}
	}
	var all []int
	for _, b := range r.batches {
		all = append(all, b...)
	}
	slices.Sort(all)
	if want := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}; !slices.Equal(all, want) {
		t.Errorf("items signalled %v, want each of 1..20 once", all)
	}
	if len(r.batches) < 2 || len(r.batches) >= 20 {
		t.Errorf("%d signals for 20 items over %v, want them shared at a pace of %v", len(r.batches), 20*30*time.Millisecond, pace)
	}
	for i := 1; i < len(r.starts); i++ {
		// The limiter's token arrives a pace after the last; allow its clock's rounding.
		if gap := r.starts[i].Sub(r.starts[i-1]); gap < pace-5*time.Millisecond {
			t.Errorf("signal %d started %v after the one before, want at least %v", i+1, gap, pace)
		}
	}
	// The sender waits out one more pace for late items, then retires the key.
	time.Sleep(2 * pace)
	if items, busy := q.Waiting("pool"); len(items) != 0 || busy {
		t.Errorf("two paces after the last answer: %d waiting, sender busy %v; want the key retired", len(items), busy)
	}
}

// A failed signal fails every caller whose item it carried; the next items go in a new signal.
func TestAFailedSignalFailsItsItemsOnly(t *testing.T) {
	refused := errors.New("refused")
	r := &recorder{err: refused}
	q := New(r.send, Options{MaxBatch: 100, Hold: time.Minute})
	if err := q.Commit(context.Background(), "pool", 1); !errors.Is(err, refused) {
		t.Errorf("first item: %v, want the signal's error", err)
	}
	r.mu.Lock()
	r.err = nil
	r.mu.Unlock()
	if err := q.Commit(context.Background(), "pool", 2); err != nil {
		t.Errorf("second item: %v, want accepted", err)
	}
	if want := [][]int{{1}, {2}}; !slices.EqualFunc(r.batches, want, slices.Equal[[]int]) {
		t.Errorf("signals %v, want %v", r.batches, want)
	}
}
