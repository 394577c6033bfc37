package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestTheCommandLineOnlyAnswersVersionAndHelp(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantDone bool
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{"no arguments: the agent starts", nil, false, 0, "", ""},
		{"--version", []string{"--version"}, true, 0, "vpcnetd ", ""},
		{"--help lists the environment variables", []string{"--help"}, true, 0, "WARM_IP_TARGET", ""},
		{"-h", []string{"-h"}, true, 0, "every setting comes from an environment variable", ""},
		{"any other argument is a mistake", []string{"--warm-ip-target=5"}, true, 2, "", "takes no arguments, only environment variables"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code, done := commandLine(tt.args, &stdout, &stderr)
			if done != tt.wantDone || code != tt.wantCode {
				t.Fatalf("commandLine(%q) = %d, %v; want %d, %v", tt.args, code, done, tt.wantCode, tt.wantDone)
			}
			if !strings.Contains(stdout.String(), tt.wantOut) || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("stdout %q, stderr %q; want %q and %q", &stdout, &stderr, tt.wantOut, tt.wantErr)
			}
		})
	}
}
