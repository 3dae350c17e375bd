package testworld

import (
	"log/slog"
	"os"
	"sort"

	sdklog "go.temporal.io/sdk/log"
)

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// quietLogger keeps the SDK's client chatter out of test output: warnings and errors only.
func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}
