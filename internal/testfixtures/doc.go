// Package testfixtures reads what FAISS itself returned for the search
// fixtures in testdata/fixtures (NAME.search.json, written by
// testdata/gen_fixtures.py), for the tests of every package.
package testfixtures
