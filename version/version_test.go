package version

import (
	"runtime/debug"
	"testing"
)

func TestBuildInfoBecomesVersionAndShortCommit(t *testing.T) {
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{
			name: "work tree build with changes",
			bi: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "604aac0e1b2c3d4e5f60718293a4b5c6d7e8f901"}, {Key: "vcs.modified", Value: "true"},
			}},
			want: "(devel) commit 604aac0e1b2c-dirty (go1.26.8)",
		},
		{
			name: "tagged module without VCS stamp",
			bi:   debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}},
			want: "v0.3.0 (go1.26.8)",
		},
		{
			name: "no main version at all",
			bi:   debug.BuildInfo{GoVersion: "go1.26.8"},
			want: "(devel) (go1.26.8)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(&tt.bi).String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
