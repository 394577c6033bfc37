// Package pluginlog is where a CNI plugin of vpcnet's logs: the file its
// network configuration names (pluginLogFile, as the Amazon VPC CNI's
// plugins), else warnings and errors on stderr, which the runtime logs.
package pluginlog

import (
	"log/slog"
	"os"
)

// Open returns the plugin's logger at level and the function that closes
// its file. A file that cannot be opened is said on stderr, which then
// takes the log: a plugin never fails for its log.
func Open(file string, level slog.Level) (*slog.Logger, func()) {
	if file == "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), func() {}
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		l := slog.New(slog.NewTextHandler(os.Stderr, nil))
		l.Warn("cannot open plugin log file; logging to stderr", "file", file, "err", err)
		return l, func() {}
	}
	return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: level})).With("pid", os.Getpid()), func() { f.Close() }
}
