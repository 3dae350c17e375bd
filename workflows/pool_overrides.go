package workflows

import (
	"math"
	"time"
)

// activeOverride returns the index of the first scheduled override active at now (-1 if none)
// and the next time after now at which any override starts or ends (zero if none will), so the
// pool can set one timer for the next change. Pure: it reads only its arguments, so the pool
// evaluates it against workflow time deterministically.
func activeOverride(overrides []ScheduledOverride, now time.Time) (int, time.Time) {
	active := -1
	var next time.Time
	for i, o := range overrides {
		on, change := o.at(now)
		if on && active < 0 {
			active = i
		}
		if !change.IsZero() && (next.IsZero() || change.Before(next)) {
			next = change
		}
	}
	return active, next
}

// at reports whether the override is active at now, and when it next starts or ends.
func (o ScheduledOverride) at(now time.Time) (bool, time.Time) {
	start, end := o.StartTime.UTC(), o.EndTime.UTC()
	length := end.Sub(start)
	if now.Before(start) {
		return false, start
	}
	if o.RecurrenceRule == nil {
		if now.Before(end) {
			return true, end
		}
		return false, time.Time{}
	}
	k := o.occurrenceAt(now)
	from := o.occurrence(k)
	if now.Before(from.Add(length)) && o.beforeUntil(from) {
		return true, from.Add(length)
	}
	if following := o.occurrence(k + 1); o.beforeUntil(following) {
		return false, following
	}
	return false, time.Time{}
}

// occurrence is the start of the k-th repetition (k = 0 is StartTime).
func (o ScheduledOverride) occurrence(k int) time.Time {
	start := o.StartTime.UTC()
	switch o.RecurrenceRule.Frequency {
	case FrequencyDaily:
		return start.AddDate(0, 0, k)
	case FrequencyWeekly:
		return start.AddDate(0, 0, 7*k)
	case FrequencyMonthly:
		return start.AddDate(0, k, 0)
	default:
		return start.AddDate(k, 0, 0)
	}
}

// occurrenceAt finds the last repetition that starts at or before now (now >= StartTime). The
// estimate divides by the shortest period, so it is never too small, then steps back.
func (o ScheduledOverride) occurrenceAt(now time.Time) int {
	elapsed := now.Sub(o.StartTime.UTC())
	k := int(math.Min(float64(elapsed/recurrencePeriodMin(o.RecurrenceRule.Frequency)), 1e6))
	for k > 0 && o.occurrence(k).After(now) {
		k--
	}
	for !o.occurrence(k + 1).After(now) {
		k++
	}
	return k
}

func (o ScheduledOverride) beforeUntil(t time.Time) bool {
	u := o.RecurrenceRule.UntilTime
	return u == nil || t.Before(u.UTC())
}

// recurrencePeriodMin is the shortest length of one period of a frequency (a month is at
// least 28 days, a year at least 365).
func recurrencePeriodMin(frequency string) time.Duration {
	switch frequency {
	case FrequencyDaily:
		return 24 * time.Hour
	case FrequencyWeekly:
		return 7 * 24 * time.Hour
	case FrequencyMonthly:
		return 28 * 24 * time.Hour
	case FrequencyYearly:
		return 365 * 24 * time.Hour
	}
	return math.MaxInt64
}

// effectiveBounds layers the spec's bounds, an active scheduled override and the operator's
// scale, in that order, and keeps min <= max (a max below min wins: max is the hard cap).
func effectiveBounds(spec PoolSpec, scale ScaleRequest, now time.Time) (Bounds, bool, time.Time) {
	b := spec.Bounds()
	i, next := activeOverride(spec.ScheduledOverrides, now)
	if i >= 0 {
		o := spec.ScheduledOverrides[i]
		if o.MinReplicas != nil {
			b.Min = *o.MinReplicas
		}
		if o.MaxReplicas != nil {
			b.Max = *o.MaxReplicas
		}
	}
	if scale.Min != nil {
		b.Min = *scale.Min
	}
	if scale.Max != nil {
		b.Max = *scale.Max
	}
	b.Min = min(b.Min, b.Max)
	b.MinIdle = min(b.MinIdle, b.Max)
	return b, i >= 0, next
}
