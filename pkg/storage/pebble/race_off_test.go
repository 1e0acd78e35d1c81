//go:build !race

package pebble

const raceDetector = false
