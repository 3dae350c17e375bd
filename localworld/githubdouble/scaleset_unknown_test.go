package githubdouble

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/actions/scaleset"
)

// rawPoll polls the session's queue over HTTP, as the client would but without reading the
// answer for it, and answers the message.
func rawPoll(t *testing.T, sc *scaleset.MessageSessionClient) messageJSON {
	t.Helper()
	sess := sc.Session()
	var msg messageJSON
	if st := arcCall(t, "GET", sess.MessageQueueURL, "Bearer "+sess.MessageQueueAccessToken, nil, &msg); st != http.StatusOK {
		t.Fatalf("raw poll answered %d, want a message", st)
	}
	return msg
}

// TestScaleSetUnknownJobMessageIsSkipped: a batch may begin with a job message of a type no
// client knows; the official client skips it and reads the jobs after it.
func TestScaleSetUnknownJobMessageIsSkipped(t *testing.T) {
	w := scaleSetWorld(t, Config{ScaleSetUnknownMessages: UnknownJobMessages})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "unknown-job", "ss-unknown-job")
	sc := openSession(t, c, set.ID, "listener")
	j, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-unknown-job"}})

	raw := rawPoll(t, sc)
	var jobs []jobMessageJSON
	if err := json.Unmarshal([]byte(raw.Body), &jobs); err != nil || len(jobs) != 2 || jobs[0].MessageType != UnknownMessageType {
		t.Fatalf("batch = %s (%v), want the unknown job message first", raw.Body, err)
	}
	msg := nextMessage(t, sc, 0)
	if assigned, _, _ := jobIDs(msg); msg.MessageID != int(raw.MessageID) || !slices.Equal(assigned, []int64{j.ID}) {
		t.Errorf("client read message %d assigning %v, want %d assigning [%d]", msg.MessageID, assigned, raw.MessageID, j.ID)
	}
}

// TestScaleSetUnknownQueueMessageWaitsUntilPassed: a queue message of a type no client knows
// stops the official client's GetMessage, poll after poll, until the listener deletes it or
// polls past it by its id; the job messages behind it then come.
func TestScaleSetUnknownQueueMessageWaitsUntilPassed(t *testing.T) {
	w := scaleSetWorld(t, Config{ScaleSetUnknownMessages: UnknownQueueMessages})
	c, _ := w.scaleSetClient("acme")
	set := createSet(t, c, "unknown-queue", "ss-unknown-queue")
	sc := openSession(t, c, set.ID, "listener")
	first, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-unknown-queue"}})

	for range 2 {
		if _, err := sc.GetMessage(t.Context(), 0, 10); err == nil || !strings.Contains(err.Error(), "unsupported message type") {
			t.Fatalf("GetMessage before the unknown message = %v, want the client's unsupported message type", err)
		}
	}
	unknown := rawPoll(t, sc)
	if unknown.MessageType != UnknownMessageType {
		t.Fatalf("raw poll = %+v, want the unknown message", unknown)
	}
	msg := nextMessage(t, sc, int(unknown.MessageID))
	if assigned, _, _ := jobIDs(msg); !slices.Equal(assigned, []int64{first.ID}) {
		t.Errorf("past the unknown message: assigned %v, want [%d]", assigned, first.ID)
	}
	ack(t, sc, msg)

	second, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"ss-unknown-queue"}})
	unknown = rawPoll(t, sc)
	if err := sc.DeleteMessage(t.Context(), int(unknown.MessageID)); err != nil || unknown.MessageType != UnknownMessageType {
		t.Fatalf("deleting the unknown message %+v: %v", unknown, err)
	}
	if assigned, _, _ := jobIDs(nextMessage(t, sc, 0)); !slices.Equal(assigned, []int64{second.ID}) {
		t.Errorf("after deleting the unknown message: assigned %v, want [%d]", assigned, second.ID)
	}
}
