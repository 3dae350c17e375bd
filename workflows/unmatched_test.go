package workflows

import (
	"slices"
	"testing"
)

func TestRecordUnmatchedKeepsTheNewestOnceEach(t *testing.T) {
	var jobs []UnmatchedJob
	for _, id := range []int64{1, 2, 2, 0, 3, 4, 1} {
		jobs = RecordUnmatched(jobs, UnmatchedJob{JobID: id}, 3)
	}
	var ids []int64
	for _, j := range jobs {
		ids = append(ids, j.JobID)
	}
	// 2 is kept once; 0 is no job; 1 dropped as the oldest of four, then recorded again.
	if want := []int64{3, 4, 1}; !slices.Equal(ids, want) {
		t.Errorf("kept %v, want %v", ids, want)
	}
}
