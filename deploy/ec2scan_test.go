package deploy

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	cloudPkg = "github.com/vpcnet/vpcnet/cloud"
	ec2Pkg   = "github.com/aws/aws-sdk-go-v2/service/ec2"
)

// ec2Calls is what cloud/ asks of EC2, each with where in the code.
type ec2Calls struct {
	actions     map[string][]string // API action → positions
	tagOnCreate map[string][]string // create action whose input sets TagSpecifications → positions
}

// ec2Usage type-checks cloud/'s non-test files and collects every EC2 API
// action they use: a method of *ec2.Client referred to (called or taken as
// a value), and a paginator built on the client. Types, not names, decide,
// so a renamed field or a local copy of the client is still found; a client
// handed to anything else fails the test, since what that does is unknown.
func ec2Usage(t *testing.T) ec2Calls {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH: cloud/ cannot be type-checked against its dependencies")
	}
	exports := goList(t, "-deps", "-export", "-f", "{{.ImportPath}}\t{{.Export}}", cloudPkg)
	dir := goList(t, "-f", "{{.ImportPath}}\t{{.Dir}}", cloudPkg)[cloudPkg]
	files := goList(t, "-f", `{{.ImportPath}}	{{join .GoFiles "\x00"}}`, cloudPkg)[cloudPkg]

	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, name := range strings.Split(files, "\x00") {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	info := &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	if _, err := (&types.Config{Importer: imp}).Check(cloudPkg, fset, parsed, info); err != nil {
		t.Fatalf("type-check cloud/: %v", err)
	}

	calls := ec2Calls{actions: map[string][]string{}, tagOnCreate: map[string][]string{}}
	pos := func(n ast.Node) string {
		p := fset.Position(n.Pos())
		return fmt.Sprintf("cloud/%s:%d", filepath.Base(p.Filename), p.Line)
	}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				sel := info.Selections[n]
				if sel == nil {
					return true
				}
				switch {
				case sel.Kind() == types.MethodVal && isEC2Client(sel.Recv()):
					if action, ok := apiAction(sel.Obj()); ok {
						calls.actions[action] = append(calls.actions[action], pos(n))
					}
				case sel.Kind() == types.FieldVal && n.Sel.Name == "TagSpecifications":
					if op, ok := inputOf(sel.Recv()); ok {
						calls.tagOnCreate[op] = append(calls.tagOnCreate[op], pos(n))
					}
				}
			case *ast.CompositeLit:
				op, ok := inputOf(info.Types[n].Type)
				if !ok {
					return true
				}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "TagSpecifications" {
							calls.tagOnCreate[op] = append(calls.tagOnCreate[op], pos(kv))
						}
					}
				}
			case *ast.CallExpr:
				for _, arg := range n.Args {
					if !isEC2Client(info.Types[arg].Type) {
						continue
					}
					action, err := clientConsumer(info, n)
					if err != nil {
						t.Errorf("%s: %v", pos(n), err)
						continue
					}
					calls.actions[action] = append(calls.actions[action], pos(n))
				}
			}
			return true
		})
	}
	return calls
}

var paginator = regexp.MustCompile(`^New(\w+)Paginator$`)

// clientConsumer names the action of a call that takes the EC2 client as an
// argument: only the SDK's paginators are understood.
func clientConsumer(info *types.Info, call *ast.CallExpr) (string, error) {
	var fn types.Object
	switch f := ast.Unparen(call.Fun).(type) {
	case *ast.SelectorExpr:
		fn = info.Uses[f.Sel]
	case *ast.Ident:
		fn = info.Uses[f]
	}
	if fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == ec2Pkg {
		if m := paginator.FindStringSubmatch(fn.Name()); m != nil {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("the EC2 client is passed to %v, so this test cannot tell which EC2 actions it calls; "+
		"call the client's methods directly or teach deploy/ec2scan_test.go about it", fn)
}

func isEC2Client(t types.Type) bool {
	p, ok := t.(*types.Pointer)
	if !ok {
		return false
	}
	n, ok := p.Elem().(*types.Named)
	return ok && n.Obj().Name() == "Client" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == ec2Pkg
}

// apiAction is the EC2 action of a client method: the operation methods
// take (ctx, *<Action>Input, ...); others (Options) are not API calls.
func apiAction(obj types.Object) (string, bool) {
	sig, ok := obj.Type().(*types.Signature)
	if !ok || sig.Params().Len() < 2 {
		return "", false
	}
	op, ok := inputOf(sig.Params().At(1).Type())
	return op, ok && op == obj.Name()
}

// inputOf returns Op for ec2.OpInput or *ec2.OpInput.
func inputOf(t types.Type) (string, bool) {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != ec2Pkg {
		return "", false
	}
	return strings.CutSuffix(n.Obj().Name(), "Input")
}

// goList runs `go list` in the module and returns its tab-separated output
// lines as a map from the first field to the second.
func goList(t *testing.T, args ...string) map[string]string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	m := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "\t")
		m[k] = v
	}
	return m
}
