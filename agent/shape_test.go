package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxMethods is the most methods a type of the agent may have: a type
// that does more than that is doing more than one job (issue 11 split a
// 66-method Agent by ownership).
const maxMethods = 15

// TestNoAgentTypeHasMoreThan15Methods counts the methods, exported or
// not, of every type declared in agent/ and the packages under it.
func TestNoAgentTypeHasMoreThan15Methods(t *testing.T) {
	counts := map[string]int{} // package directory + "." + type
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			counts[filepath.Dir(path)+"."+receiverName(fn.Recv.List[0].Type)]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) < 10 {
		t.Fatalf("found methods of only %d types under agent/: the walk missed the sources", len(counts))
	}
	for typ, n := range counts {
		if n > maxMethods {
			t.Errorf("%s has %d methods, more than %d: split it by what each part owns", typ, n, maxMethods)
		}
	}
}

// receiverName is T for receivers T, *T, T[P] and *T[P].
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}
