package githubdouble

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// randomToken returns prefix followed by 160 random bits in base32: unguessable, and the
// prefix makes a leaked credential easy to spot in a log or a workflow history.
func randomToken(prefix string) string {
	b := make([]byte, 20)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return prefix + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)
}

// randomAlnum returns n random characters from [A-Za-z0-9], the alphabet of GitHub's tokens.
func randomAlnum(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// newUUID returns a random (version 4) UUID, the form of GitHub's delivery ids.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// page is one page of a listing, with GitHub's pagination parameters.
type page struct {
	number, perPage, last int
	start, end            int
}

// paginate applies per_page (default 30, at most 100) and page (from 1) to a list of total
// items, as GitHub does; out-of-range pages are empty.
func paginate(r *http.Request, total int) page {
	q := r.URL.Query()
	perPage := 30
	if v, err := strconv.Atoi(q.Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	number := 1
	if v, err := strconv.Atoi(q.Get("page")); err == nil && v > 0 {
		number = v
	}
	last := max((total+perPage-1)/perPage, 1)
	start := min((number-1)*perPage, total)
	end := min(start+perPage, total)
	return page{number: number, perPage: perPage, last: last, start: start, end: end}
}

// setLink writes GitHub's Link header (first, prev, next, last), which go-github reads to fill
// Response.NextPage. A single page gets no header, as on GitHub.
func (p page) setLink(w http.ResponseWriter, r *http.Request) {
	if p.last <= 1 {
		return
	}
	link := func(n int, rel string) string {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path}
		q := r.URL.Query()
		q.Set("per_page", strconv.Itoa(p.perPage))
		q.Set("page", strconv.Itoa(n))
		u.RawQuery = q.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var parts []string
	if p.number > 1 {
		parts = append(parts, link(min(p.number-1, p.last), "prev"))
	}
	if p.number < p.last {
		parts = append(parts, link(p.number+1, "next"), link(p.last, "last"))
	}
	if p.number > 1 {
		parts = append(parts, link(1, "first"))
	}
	w.Header().Set("Link", strings.Join(parts, ", "))
}
