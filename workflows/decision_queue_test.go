package workflows

import (
	"errors"
	"slices"
	"testing"
	"time"

	"go.temporal.io/sdk/workflow"
)

// The deciders continue as new on DecisionTaskQueue; a run of the previous release (no
// marker) keeps the queue it ran on.

func TestPoolContinuesAsNewOnTheDecisionQueue(t *testing.T) {
	for _, tt := range []struct {
		name  string
		moved bool
	}{{"in force", true}, {"a run of the previous release", false}} {
		t.Run(tt.name, func(t *testing.T) {
			h := newPoolHarness(t, 1)
			if !tt.moved {
				h.onSegment = func() {
					h.env.OnGetVersion(changePoolDecidesApart, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
				}
			}
			spec := poolTestSpec()
			spec.MinReplicas = 1
			h.run(spec, 30*time.Second)
			if len(h.canQueues) == 0 {
				t.Fatal("the pool never continued as new")
			}
			onDecisions := slices.ContainsFunc(h.canQueues, func(q string) bool { return q == DecisionTaskQueue })
			if onDecisions != tt.moved {
				t.Errorf("continued as new on %v; want DecisionTaskQueue: %v", h.canQueues, tt.moved)
			}
		})
	}
}

func TestScaleSetListenerContinuesAsNewOnTheDecisionQueue(t *testing.T) {
	for _, tt := range []struct {
		name  string
		moved bool
	}{{"in force", true}, {"a run of the previous release", false}} {
		t.Run(tt.name, func(t *testing.T) {
			w := newListenerWorld(t)
			if !tt.moved {
				w.env.OnGetVersion(changeListenerDecidesApart, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
			w.run(ScaleSetListenerInput{}, 1)
			var can *workflow.ContinueAsNewError
			if !errors.As(w.env.GetWorkflowError(), &can) {
				t.Fatal("the listener did not continue as new")
			}
			if (can.TaskQueueName == DecisionTaskQueue) != tt.moved {
				t.Errorf("continued as new on %q; want DecisionTaskQueue: %v", can.TaskQueueName, tt.moved)
			}
		})
	}
}

func TestScaleWindowContinuesAsNewOnTheDecisionQueue(t *testing.T) {
	for _, tt := range []struct {
		name  string
		moved bool
	}{{"in force", true}, {"a run of the previous release", false}} {
		t.Run(tt.name, func(t *testing.T) {
			wt := newWindowTest(t)
			wt.expectUpdates(2)
			// A run that continues as new after each window (changeRunSpansWindows' old branch).
			wt.env.OnGetVersion(changeRunSpansWindows, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			if !tt.moved {
				wt.env.OnGetVersion(changeWindowDecidesApart, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
			}
			wt.signalDuringUpdates()
			wt.signalAt(0, ev("d1", 1, JobQueued))
			wt.env.ExecuteWorkflow(ScaleWindowWorkflowType, ScaleWindowInput{Pool: "linux", Window: 5 * time.Second})
			var can *workflow.ContinueAsNewError
			if !errors.As(wt.env.GetWorkflowError(), &can) {
				t.Fatalf("the window ended with %v, want it to continue as new", wt.env.GetWorkflowError())
			}
			if (can.TaskQueueName == DecisionTaskQueue) != tt.moved {
				t.Errorf("continued as new on %q; want DecisionTaskQueue: %v", can.TaskQueueName, tt.moved)
			}
		})
	}
}
