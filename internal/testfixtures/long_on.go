//go:build long

package testfixtures

const Long = true
