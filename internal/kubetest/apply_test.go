package kubetest

import (
	"slices"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name      string
		manifests string
		want      []string // describe() of each object, in order
		wantErr   string
	}{
		{
			name: "documents with comments and empty ones",
			manifests: `# leading comment
---
apiVersion: v1
kind: Namespace
metadata:
  name: a
---
---
# only a comment
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: b
  namespace: a
`,
			want: []string{"v1 Namespace a", "v1 ConfigMap a/b"},
		},
		{
			name:      "json",
			manifests: `{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "s", "namespace": "n"}}`,
			want:      []string{"v1 ServiceAccount n/s"},
		},
		{
			name: "list is expanded",
			manifests: `apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: one}}
- {apiVersion: v1, kind: Secret, metadata: {name: two}}
`,
			want: []string{"v1 ConfigMap one", "v1 Secret two"},
		},
		{
			name:      "nothing",
			manifests: "\n---\n",
			want:      nil,
		},
		{
			name: "object without a name",
			manifests: `apiVersion: v1
kind: Namespace
metadata: {name: fine}
---
apiVersion: v1
kind: ConfigMap
metadata: {namespace: x}
`,
			wantErr: "manifest document 2: object v1 ConfigMap x/ lacks apiVersion, kind or metadata.name",
		},
		{
			name:      "not yaml",
			manifests: "apiVersion: v1\nkind: [unclosed\n",
			wantErr:   "manifest document 1:",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := Decode([]byte(tt.manifests))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decode error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, describe(o))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Decode = %q, want %q", got, tt.want)
			}
		})
	}
}
