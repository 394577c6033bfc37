package sim

import (
	"encoding/base64"
	"strconv"
	"strings"
)

// paging is the MaxResults/NextToken of one Describe call. The token
// names the position after the last item returned, not an offset, so a
// resource deleted between pages makes nothing skip or repeat.
type paging struct {
	max   int // 0: everything
	after int // items with a key above this come next
}

// paging reads MaxResults (lo to hi, as EC2 bounds it for the action; def
// when absent, 0 meaning no limit) and NextToken.
func (f fields) paging(lo, hi, def int) (paging, error) {
	pg := paging{max: def, after: -1}
	n, ok, err := f.intOpt("MaxResults")
	if err != nil {
		return pg, err
	}
	if ok {
		if n < lo {
			return pg, errorf(codeInvalidParameterValue, "Value ( %d ) for parameter maxResults is invalid. Expecting a value greater than %d.", n, lo-1)
		}
		if n > hi {
			return pg, errorf(codeInvalidParameterValue, "Value ( %d ) for parameter maxResults is invalid. Expecting a value less than %d.", n, hi+1)
		}
		pg.max = n
	}
	if tok := f.get("NextToken"); tok != "" {
		after, ok := decodeToken(tok)
		if !ok {
			return pg, errorf(codeInvalidPaginationToken, "Invalid pagination token: %s", tok)
		}
		pg.after = after
	}
	return pg, nil
}

// paginate returns the page of items (sorted by ascending key) that pg
// asks for, and the token for the next page, empty on the last.
func paginate[T any](items []T, key func(T) int, pg paging) ([]T, string) {
	start := 0
	for start < len(items) && key(items[start]) <= pg.after {
		start++
	}
	items = items[start:]
	if pg.max == 0 || len(items) <= pg.max {
		return items, ""
	}
	page := items[:pg.max]
	return page, encodeToken(key(page[len(page)-1]))
}

const tokenPrefix = "simpage:"

func encodeToken(after int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + strconv.Itoa(after)))
}

func decodeToken(tok string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, false
	}
	num, ok := strings.CutPrefix(string(b), tokenPrefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil && n >= 0
}
