//go:build race

package redlock

const raceDetector = true
