package activities

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/actions/scaleset"
	"go.temporal.io/sdk/temporal"

	"github.com/runnerflow/runnerflow/workflows"
)

// actionsCall names an Actions service operation and says what its 404 and 409 mean.
type actionsCall struct {
	what string
	// on404: the set is gone (ErrScaleSetGone), the session is (ErrSessionLost), or the
	// object asked for does not exist (ErrNotFound).
	on404 string
	// on409: another session holds the set (ErrSessionConflict), or the state moved (ErrTransient).
	on409 string
}

var (
	callEnsureScaleSet = actionsCall{what: "ensure scale set", on404: workflows.ErrNotFound, on409: workflows.ErrTransient}
	callDeleteScaleSet = actionsCall{what: "delete scale set", on404: workflows.ErrScaleSetGone, on409: workflows.ErrTransient}
	callScaleSetJIT    = actionsCall{what: "generate scale-set runner configuration", on404: workflows.ErrScaleSetGone, on409: workflows.ErrTransient}
	callScaleSetRunner = actionsCall{what: "scale-set runner", on404: workflows.ErrNotFound, on409: workflows.ErrTransient}
	callOpenSession    = actionsCall{what: "open message session", on404: workflows.ErrScaleSetGone, on409: workflows.ErrSessionConflict}
	callSessionQueue   = actionsCall{what: "message session", on404: workflows.ErrSessionLost, on409: workflows.ErrTransient}
)

// sessionExpiredException is the exception the service names when a call's session expired.
const sessionExpiredException = "RunnerScaleSetSessionExpiredException"

// scaleSetExistsException is the exception the service names when a set's name is taken.
const scaleSetExistsException = "RunnerScaleSetExistsException"

// classifyActionsError is the one place Actions service errors become Temporal application
// errors. The status comes from the call's recorded answer (a: withAnswer); the client's
// sentinel errors name a busy, missing or existing runner. The message keeps the client's text
// only for error answers, whose bodies are the service's exceptions: a success answer the
// client could not read may hold a credential (a JIT configuration, a token), so its text is
// dropped.
func classifyActionsError(call actionsCall, err error, a *answer) error {
	if err == nil {
		return nil
	}
	status, retryAfterDelay := a.last()
	msg := call.what + ": " + err.Error()
	if status > 0 && status < 400 {
		msg = fmt.Sprintf("%s: the service's answer (%d) could not be read", call.what, status)
	}
	switch {
	case errors.Is(err, scaleset.JobStillRunningError):
		// Expected while a job runs: benign, so it is not logged as an error.
		return temporal.NewApplicationErrorWithOptions(msg, workflows.ErrRunnerBusy,
			temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign})
	case errors.Is(err, scaleset.RunnerNotFoundError):
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrNotFound, nil)
	case status == http.StatusBadRequest && call == callEnsureScaleSet && strings.Contains(err.Error(), scaleSetExistsException):
		// A set of that name was made meanwhile: the service answers 400 with this exception,
		// not 409. Retried: the retry adopts it.
		return temporal.NewApplicationError(msg, workflows.ErrTransient)
	case status == http.StatusBadRequest && call.on404 == workflows.ErrSessionLost &&
		strings.Contains(err.Error(), sessionExpiredException):
		// The service answers a call on a session it timed out with 400 and this exception
		// (the client exposes no sentinel for it): the session is gone, as with a 404.
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrSessionLost, nil)
	}
	return classifyActionsStatus(call, msg, status, retryAfterDelay)
}

func classifyActionsStatus(call actionsCall, msg string, status int, retryAfterDelay time.Duration) error {
	switch {
	case status == http.StatusNotFound:
		return temporal.NewNonRetryableApplicationError(msg, call.on404, nil)
	case status == http.StatusConflict && call.on409 == workflows.ErrSessionConflict:
		// Another listener holds the set, or a lost worker's session lingers until the service
		// ends it: waiting is the designed answer, so benign.
		return temporal.NewApplicationErrorWithOptions(msg, workflows.ErrSessionConflict,
			temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign})
	case status == http.StatusUnauthorized:
		// The admin token was refused (the caller drops its client) or the message-queue token
		// could not be refreshed: another attempt starts afresh.
		return temporal.NewApplicationError(msg, workflows.ErrTransient)
	case status == http.StatusForbidden:
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrForbidden, nil)
	case status == http.StatusBadRequest:
		return temporal.NewNonRetryableApplicationError(msg, workflows.ErrInvalidSpec, nil)
	case status == http.StatusTooManyRequests:
		if retryAfterDelay == 0 {
			retryAfterDelay = time.Minute
		}
		return retryAfter(msg, workflows.ErrRateLimited, retryAfterDelay)
	case status >= 500 && retryAfterDelay > 0:
		return retryAfter(msg, workflows.ErrTransient, retryAfterDelay)
	}
	// 5xx, 409 and network errors: the service is unwell or its state moved; back off.
	return temporal.NewApplicationError(msg, workflows.ErrTransient)
}
