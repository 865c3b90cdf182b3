package upstreamsim

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
)

// Paging limits.
const (
	defaultLimit = 50
	maxLimit     = 500
)

// pageQuery is a parsed cursor-paging request.
type pageQuery struct {
	limit int
	sort  int    // 1 ascending, -1 descending
	after string // key of the last item of the previous page; "" for the first page
}

// cursor is the opaque nextPage token: base64url of this JSON.
type cursor struct {
	K string `json:"k"`
	S int    `json:"s"`
}

// parsePage reads limit, sort and nextPage. A cursor carries its own sort
// order, so a client that re-sends only nextPage keeps its order.
func parsePage(q url.Values, defSort int) (pageQuery, *apiError) {
	pq := pageQuery{limit: defaultLimit, sort: defSort}
	var c checker
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			c.add(`"limit" must be a number`)
		case n < 1:
			c.add(`"limit" must be greater than or equal to 1`)
		case n > maxLimit:
			c.add(`"limit" must be less than or equal to ` + strconv.Itoa(maxLimit))
		default:
			pq.limit = n
		}
	}
	if v := q.Get("sort"); v != "" {
		switch v {
		case "1":
			pq.sort = 1
		case "-1":
			pq.sort = -1
		default:
			c.add(`"sort" must be one of [1, -1]`)
		}
	}
	if v := q.Get("nextPage"); v != "" {
		cur, ok := decodeCursor(v)
		if !ok {
			c.add(`"nextPage" is not a valid cursor`)
		} else {
			pq.after, pq.sort = cur.K, cur.S
		}
	}
	if len(c.problems) > 0 {
		return pq, problemList(typeClientError, c.problems...)
	}
	return pq, nil
}

func decodeCursor(s string) (cursor, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, false
	}
	var c cursor
	if json.Unmarshal(b, &c) != nil || c.K == "" || (c.S != 1 && c.S != -1) {
		return cursor{}, false
	}
	return c, true
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// listReply is the upstream's list shape. Count is the number of items
// matching the filters across all pages.
type listReply[T any] struct {
	Items    []T     `json:"items"`
	NextPage *string `json:"nextPage"`
	Count    int     `json:"count"`
}

// paginate pages items, which are sorted by ascending key. It returns copies
// (view) of the page's items, so they can be encoded after the caller's lock
// is released.
func paginate[T any, V any](items []T, key func(T) string, view func(T) V, pq pageQuery) listReply[V] {
	n := len(items)
	out := listReply[V]{Items: make([]V, 0, min(pq.limit, n)), Count: n}
	var start int
	if pq.sort == 1 {
		if pq.after != "" {
			start = sort.Search(n, func(i int) bool { return key(items[i]) > pq.after })
		}
		for i := start; i < n && len(out.Items) < pq.limit; i++ {
			out.Items = append(out.Items, view(items[i]))
			if len(out.Items) == pq.limit && i+1 < n {
				next := encodeCursor(cursor{K: key(items[i]), S: 1})
				out.NextPage = &next
			}
		}
		return out
	}
	start = n - 1
	if pq.after != "" {
		start = sort.Search(n, func(i int) bool { return key(items[i]) >= pq.after }) - 1
	}
	for i := start; i >= 0 && len(out.Items) < pq.limit; i-- {
		out.Items = append(out.Items, view(items[i]))
		if len(out.Items) == pq.limit && i > 0 {
			next := encodeCursor(cursor{K: key(items[i]), S: -1})
			out.NextPage = &next
		}
	}
	return out
}
