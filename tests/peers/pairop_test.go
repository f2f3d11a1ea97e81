package peers

import "testing"

// bothLeaser is a leaser and a batch leaser at once, as the Redis leaser
// is; it counts which path a pair took.
type bothLeaser struct{ one, all int }

func (l *bothLeaser) acquire(int, string) (int64, error) { l.one++; return 1, nil }
func (l *bothLeaser) release(int, string, int64) error   { return nil }
func (l *bothLeaser) acquireAll(_ int, keys []string) ([]int64, error) {
	l.all++
	return make([]int64, len(keys)), nil
}
func (l *bothLeaser) releaseAll(int, []string, []int64) error { return nil }

// A row's kind decides how many keys a pair takes, not the leaser's type:
// a one-key row of a leaser that can also batch must take one key (this
// once made the one-key Redis row run pipelined batches of 64).
func TestPairOpFollowsTheRow(t *testing.T) {
	for _, batch := range []bool{false, true} {
		l := &bothLeaser{}
		s := system{name: "both-one"}
		if batch {
			s = system{name: "both-batch", batch: func(testing.TB) batchLeaser { return l }}
		} else {
			s.open = func(testing.TB) leaser { return l }
		}
		op := pairOp(t, s, 1)
		for range 3 {
			if _, err := op(0); err != nil {
				t.Fatal(err)
			}
		}
		if batch && (l.all != 3 || l.one != 0) || !batch && (l.one != 3 || l.all != 0) {
			t.Errorf("%s: %d one-key and %d batch takes, want 3 of the row's kind only", s.name, l.one, l.all)
		}
	}
}
