package githubdouble

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// A scale set has at most one message session. Its listener polls the session's message
// queue with the queue's own short-lived token and deletes each message it has handled; a
// message not deleted is delivered again on every poll, so a listener that lost its place gets
// the oldest unhandled message first. A poll names the last message its listener handled
// (lastMessageId), and the service does not deliver that one or any before it again, deleted or
// not (the client README's "Message ID Tracking"). The queue belongs to the set, not the
// session: job messages wait in it across sessions, and message ids rise across sessions.

const (
	// messageQueueTokenTTL is how long a message-queue token lives before polls answer 401 and
	// the listener refreshes its session. Undocumented by GitHub; an assumption.
	messageQueueTokenTTL = 45 * time.Minute
	// defaultScaleSetSessionTimeout is how long the service keeps a session whose holder
	// stopped polling: GitHub does not say; ARC's listeners before gha-runner-scale-set 0.14
	// retried a refused session for five minutes (10 × 30 s), so it is assumed shorter than that.
	defaultScaleSetSessionTimeout = 2 * time.Minute
)

// ScaleSetMessageBatch is the most job messages one queue message holds: "Responses contain at
// most 50 messages" (the client README, "Autoscaling"). As Config.ScaleSetBacklogLimit it is the
// strictest reading of the README's "Large backlogs will be truncated": what one answer cannot
// hold is lost.
const ScaleSetMessageBatch = 50

// scaleSetSession is a set's one message session.
type scaleSetSession struct {
	id           string
	owner        string
	token        string // the message-queue token
	tokenExpires time.Time
	lastSeen     time.Time
}

// queueToken names the set and session a message-queue token belongs to.
type queueToken struct {
	scaleSetID int64
	sessionID  string
}

// messageQueue is a set's queue: job messages not yet batched, and batches delivered but not
// deleted, oldest first.
type messageQueue struct {
	pending   []jobMessageJSON
	delivered []queuedMessage
	// sessionIDs is the last id given in the current session (Config.ScaleSetMessageIDsPerSession).
	sessionIDs int64
}

type queuedMessage struct {
	id   int64
	typ  string // a queue message's type; empty for a batch of job messages
	jobs []jobMessageJSON
}

// kept counts the job messages the queue holds, delivered or not.
func (q *messageQueue) kept() int {
	n := len(q.pending)
	for _, m := range q.delivered {
		n += len(m.jobs)
	}
	return n
}

// forgetThrough drops the delivered messages a listener says it has handled: those up to and
// including lastID.
func (q *messageQueue) forgetThrough(lastID int64) {
	q.delivered = slices.DeleteFunc(q.delivered, func(m queuedMessage) bool { return m.id <= lastID })
}

// scaleSetSessionJSON is the Actions service's RunnerScaleSetSession.
type scaleSetSessionJSON struct {
	SessionID               string              `json:"sessionId"`
	OwnerName               string              `json:"ownerName"`
	RunnerScaleSet          *scaleSetJSON       `json:"runnerScaleSet"`
	MessageQueueURL         string              `json:"messageQueueUrl"`
	MessageQueueAccessToken string              `json:"messageQueueAccessToken"`
	Statistics              *ScaleSetStatistics `json:"statistics"`
}

const messagesRoute = brokerPath + "/sessions/{session_id}/messages"

func (s *Server) registerSessions(mux *http.ServeMux) {
	s.handleService(mux, "POST "+scaleSetsRoute+"/{scale_set_id}/sessions", s.svcCreateSession)
	s.handleService(mux, "PATCH "+scaleSetsRoute+"/{scale_set_id}/sessions/{session_id}", s.svcRefreshSession)
	s.handleService(mux, "DELETE "+scaleSetsRoute+"/{scale_set_id}/sessions/{session_id}", s.svcDeleteSession)
}

func (s *Server) registerMessageQueue(mux *http.ServeMux) {
	s.handleQueue(mux, "GET "+messagesRoute, s.queueGetMessage)
	s.handleQueue(mux, "DELETE "+messagesRoute+"/{message_id}", s.queueDeleteMessage)
}

// liveSession is the set's session, after ending one nobody polled or refreshed for
// Config.ScaleSetSessionTimeout: until then the session of a holder that died refuses another
// (409). Callers hold s.mu.
func (s *Server) liveSession(ss *scaleSet) *scaleSetSession {
	if ss.session != nil && s.now().Sub(ss.session.lastSeen) > s.cfg.ScaleSetSessionTimeout {
		s.log.Debug("scale set session timed out", "scaleSet", ss.name, "session", ss.session.id)
		s.endSession(ss)
	}
	return ss.session
}

// endSession ends a set's session and revokes its token. Callers hold s.mu.
func (s *Server) endSession(ss *scaleSet) {
	if ss.session == nil {
		return
	}
	delete(s.st.queueTokens, ss.session.token)
	ss.session = nil
	s.st.wakeWaiters()
}

// issueQueueToken gives the session a new message-queue token, revoking the old. Callers hold s.mu.
func (s *Server) issueQueueToken(ss *scaleSet) {
	sess := ss.session
	delete(s.st.queueTokens, sess.token)
	sess.token = randomToken("GHDMQ")
	sess.tokenExpires = s.now().Add(messageQueueTokenTTL)
	sess.lastSeen = s.now()
	s.st.queueTokens[sess.token] = queueToken{scaleSetID: ss.id, sessionID: sess.id}
	s.recordSecret(sess.token)
}

// renderSession builds the session answer. Callers hold s.mu.
func (s *Server) renderSession(ss *scaleSet) scaleSetSessionJSON {
	set, stats := s.renderScaleSet(ss), s.statistics(ss)
	return scaleSetSessionJSON{
		SessionID: ss.session.id, OwnerName: ss.session.owner, RunnerScaleSet: &set,
		MessageQueueURL:         s.baseURL + "_services/broker/sessions/" + ss.session.id + "/messages",
		MessageQueueAccessToken: ss.session.token, Statistics: &stats,
	}
}

// svcCreateSession opens the set's one session; while another is open the answer is 409.
func (s *Server) svcCreateSession(r *http.Request, scope Scope, body []byte) (int, any, *serviceError) {
	var in struct {
		OwnerName string `json:"ownerName"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return 0, nil, svcErr(http.StatusBadRequest, excInvalidRequest, "The body is not a session.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, serr := s.scaleSetIn(r, scope)
	if serr != nil {
		return 0, nil, serr
	}
	s.lapseAssignments()
	if cur := s.liveSession(ss); cur != nil {
		ss.refused++
		return 0, nil, svcErr(http.StatusConflict, excSessionConflict,
			"The scale set %s already has an active session for owner %s.", ss.name, cur.owner)
	}
	ss.session = &scaleSetSession{id: newUUID(), owner: in.OwnerName}
	s.renumberForSession(ss)
	s.issueQueueToken(ss)
	return http.StatusOK, s.renderSession(ss), nil
}

// sessionOf resolves {session_id} to the set's live session. A session that ended or timed out
// is refused with unknown, the answer of the call at hand. Callers hold s.mu.
func (s *Server) sessionOf(r *http.Request, scope Scope, unknown *serviceError) (*scaleSet, *serviceError) {
	ss, serr := s.scaleSetIn(r, scope)
	if serr != nil {
		return nil, serr
	}
	if cur := s.liveSession(ss); cur == nil || cur.id != r.PathValue("session_id") {
		return nil, unknown
	}
	return ss, nil
}

// svcRefreshSession issues the session a new message-queue token. A session the service no
// longer has is 404 (actions/scaleset #123, where the client gives up on it).
func (s *Server) svcRefreshSession(r *http.Request, scope Scope, _ []byte) (int, any, *serviceError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, serr := s.sessionOf(r, scope, svcErr(http.StatusNotFound, excSessionNotFound,
		"The runner referenced session %s, which does not exist.", r.PathValue("session_id")))
	if serr != nil {
		return 0, nil, serr
	}
	s.issueQueueToken(ss)
	return http.StatusOK, s.renderSession(ss), nil
}

// svcDeleteSession ends the session; the set is free for another at once. A session the service
// no longer has (ended, timed out, or never its) is 400 RunnerScaleSetSessionExpiredException,
// as ARC's listener logs it when it closes a session on exit
// (actions/actions-runner-controller #4285).
func (s *Server) svcDeleteSession(r *http.Request, scope Scope, _ []byte) (int, any, *serviceError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, serr := s.sessionOf(r, scope, svcErr(http.StatusBadRequest, excSessionExpired,
		"The session identifier %s is not valid.", r.PathValue("session_id")))
	if serr != nil {
		return 0, nil, serr
	}
	s.endSession(ss)
	return http.StatusNoContent, nil, nil
}

// ExpireMessageQueueTokens makes every message-queue token expire now, so the next poll answers
// 401 and the listener must refresh its session.
func (s *Server) ExpireMessageQueueTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.st.scaleSets {
		if ss.session != nil {
			ss.session.tokenExpires = s.now()
		}
	}
}

// queueHandler handles a message-queue call for the session its token opens.
type queueHandler func(r *http.Request) (int, any, *serviceError)

// handleQueue registers a message-queue route behind the Actions service's faults and counting.
// Its calls authenticate with the message-queue token, checked by the handler.
func (s *Server) handleQueue(mux *http.ServeMux, pattern string, h queueHandler) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		status, out, serr := 0, any(nil), s.serviceFault()
		defer func() { s.countService(pattern, status) }()
		if serr == nil {
			status, out, serr = h(r)
		}
		status = s.writeServiceAnswer(w, status, out, serr)
	})
}

// queueSession resolves a message-queue token to its set; an unknown, revoked or expired token,
// or one for another session, is 401. Callers hold s.mu.
func (s *Server) queueSession(r *http.Request) (*scaleSet, *serviceError) {
	unauthorized := svcErr(http.StatusUnauthorized, excUnauthorized, "The message queue token is unknown or expired.")
	qt, ok := s.st.queueTokens[bearer(r)]
	if !ok || qt.sessionID != r.PathValue("session_id") {
		return nil, unauthorized
	}
	if ss := s.liveTokenSet(qt); ss != nil {
		return ss, nil
	}
	return nil, unauthorized
}

// liveTokenSet is the set of a message-queue token whose session is still the set's live one
// and whose token has not expired, marked as seen now; nil otherwise. Callers hold s.mu.
func (s *Server) liveTokenSet(qt queueToken) *scaleSet {
	ss := s.st.scaleSets[qt.scaleSetID]
	if ss == nil || s.liveSession(ss) == nil || ss.session.id != qt.sessionID || !s.now().Before(ss.session.tokenExpires) {
		return nil
	}
	ss.session.lastSeen = s.now()
	return ss
}

// messageJSON is a queue message: a batch of job messages in Body, as a JSON string.
type messageJSON struct {
	MessageID   int64               `json:"messageId"`
	MessageType string              `json:"messageType"`
	Body        string              `json:"body"`
	Statistics  *ScaleSetStatistics `json:"statistics"`
}

// queueGetMessage long-polls the set's queue: the oldest message not deleted and newer than the
// poll's lastMessageId, else a new batch of pending job messages, else 202 once the poll wait
// ends with nothing.
func (s *Server) queueGetMessage(r *http.Request) (int, any, *serviceError) {
	capacity, capErr := strconv.Atoi(r.Header.Get("X-ScaleSetMaxCapacity"))
	lastID, _ := strconv.ParseInt(r.URL.Query().Get("lastMessageId"), 10, 64)
	timer := time.NewTimer(s.cfg.ScaleSetPollWait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		ss, serr := s.queueSession(r)
		if serr != nil {
			s.mu.Unlock()
			return 0, nil, serr
		}
		s.lapseAssignments()
		if capErr == nil {
			s.setCapacity(ss, capacity)
		}
		ss.queue.forgetThrough(lastID)
		msg, ok := s.nextMessage(ss)
		wake := s.st.wake
		s.mu.Unlock()
		if ok {
			return http.StatusOK, msg, nil
		}
		if done := waitWake(r.Context(), wake, timer.C, s.done); done {
			s.touchSession(r)
			return http.StatusAccepted, nil, nil
		}
	}
}

// touchSession marks the session of a poll that ends as seen now: its holder was there while
// the poll was open, however long it lasted.
func (s *Server) touchSession(r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.queueSession(r)
}

// waitWake waits for a wake-up (false) or for the poll's end, the caller leaving or the double
// closing (true).
func waitWake(ctx context.Context, wake <-chan struct{}, timeout <-chan time.Time, closed <-chan struct{}) bool {
	select {
	case <-wake:
		return false
	case <-timeout:
	case <-ctx.Done():
	case <-closed:
	}
	return true
}

// nextMessage returns the oldest undeleted message, or batches pending job messages into a new
// one. Statistics are the set's as of the answer. Callers hold s.mu.
func (s *Server) nextMessage(ss *scaleSet) (messageJSON, bool) {
	q := &ss.queue
	if len(q.delivered) == 0 && len(q.pending) > 0 {
		s.batchPending(ss)
	}
	if len(q.delivered) == 0 {
		return messageJSON{}, false
	}
	m := q.delivered[0]
	out := messageJSON{MessageID: m.id, MessageType: cmp.Or(m.typ, jobMessagesType)}
	if m.typ == "" {
		body, err := json.Marshal(m.jobs)
		if err != nil {
			return messageJSON{}, false
		}
		out.Body = string(body)
	}
	stats := s.statistics(ss)
	out.Statistics = &stats
	return out, true
}

// jobMessagesType is the type of a queue message that batches job messages, the one type the
// official client reads.
const jobMessagesType = "RunnerScaleSetJobMessages"

// batchPending moves up to ScaleSetMessageBatch pending job messages into a new queue message, after
// the message of a type no client knows that Config.ScaleSetUnknownMessages asks for. Callers
// hold s.mu.
func (s *Server) batchPending(ss *scaleSet) {
	q := &ss.queue
	var jobs []jobMessageJSON
	switch s.cfg.ScaleSetUnknownMessages {
	case UnknownJobMessages:
		jobs = append(jobs, jobMessageJSON{MessageType: UnknownMessageType})
	case UnknownQueueMessages:
		q.delivered = append(q.delivered, queuedMessage{id: s.nextMessageID(ss), typ: UnknownMessageType})
	}
	n := min(len(q.pending), ScaleSetMessageBatch-len(jobs))
	jobs = append(jobs, q.pending[:n]...)
	q.pending = slices.Delete(q.pending, 0, n)
	q.delivered = append(q.delivered, queuedMessage{id: s.nextMessageID(ss), jobs: jobs})
}

// nextMessageID numbers a new message: from one counter for the whole double, so ids rise
// across a set's sessions (the double's assumption), or, with
// Config.ScaleSetMessageIDsPerSession, from 1 in each session. Callers hold s.mu.
func (s *Server) nextMessageID(ss *scaleSet) int64 {
	if !s.cfg.ScaleSetMessageIDsPerSession {
		return s.st.next("message")
	}
	ss.queue.sessionIDs++
	return ss.queue.sessionIDs
}

// renumberForSession gives a new session's undeleted messages new ids from 1, when ids are per
// session (Config.ScaleSetMessageIDsPerSession). Callers hold s.mu.
func (s *Server) renumberForSession(ss *scaleSet) {
	if !s.cfg.ScaleSetMessageIDsPerSession {
		return
	}
	q := &ss.queue
	q.sessionIDs = 0
	for i := range q.delivered {
		q.sessionIDs++
		q.delivered[i].id = q.sessionIDs
	}
}

// SetScaleSetMessageIDsPerSession changes Config.ScaleSetMessageIDsPerSession of a running
// double; set it while no session is open (it numbers the next ones).
func (s *Server) SetScaleSetMessageIDsPerSession(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.ScaleSetMessageIDsPerSession = on
}

// UnknownMessages says where Config.ScaleSetUnknownMessages puts a message of a type no client
// knows. Whether the service ever sends one is not public; a listener must not stall on one.
type UnknownMessages int

const (
	// NoUnknownMessages sends only the types the official client knows (the default).
	NoUnknownMessages UnknownMessages = iota
	// UnknownJobMessages begins every batch with a job message of UnknownMessageType. The
	// official client (v0.4.0) skips a job message it does not know.
	UnknownJobMessages
	// UnknownQueueMessages puts a queue message of UnknownMessageType, holding no job messages,
	// ahead of every batch. The official client's GetMessage fails on it ("unsupported message
	// type") without telling its id, so the message stays until the listener deletes it or
	// polls past it (lastMessageId) by an id it learned some other way.
	UnknownQueueMessages
)

// UnknownMessageType is the type of the messages Config.ScaleSetUnknownMessages adds.
const UnknownMessageType = "RunnerScaleSetDoubleUnknownMessage"

// queueDeleteMessage acknowledges a message; one not in the queue (never sent, or deleted
// already) is 404.
func (s *Server) queueDeleteMessage(r *http.Request) (int, any, *serviceError) {
	id, err := strconv.ParseInt(r.PathValue("message_id"), 10, 64)
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, serr := s.queueSession(r)
	if serr != nil {
		return 0, nil, serr
	}
	i := slices.IndexFunc(ss.queue.delivered, func(m queuedMessage) bool { return m.id == id })
	if err != nil || i < 0 {
		return 0, nil, svcErr(http.StatusNotFound, excInvalidRequest, "Message %s not found.", r.PathValue("message_id"))
	}
	ss.queue.delivered = slices.Delete(ss.queue.delivered, i, i+1)
	return http.StatusNoContent, nil, nil
}

// ScaleSetSessionTimeout is how long the double keeps a session its holder left open
// (Config.ScaleSetSessionTimeout).
func (s *Server) ScaleSetSessionTimeout() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.ScaleSetSessionTimeout
}

// SetScaleSetSessionTimeout changes Config.ScaleSetSessionTimeout of a running double (0
// restores the default).
func (s *Server) SetScaleSetSessionTimeout(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d <= 0 {
		d = defaultScaleSetSessionTimeout
	}
	s.cfg.ScaleSetSessionTimeout = d
}
