// Package bootclock measures time the way a trial must: as time elapsed since
// boot (CLOCK_BOOTTIME, which keeps counting through suspend and is never
// stepped by NTP or an administrator), tagged with the kernel's boot ID so
// that a value is never compared with one from another boot.
//
// File modification times and the wall clock are deliberately not used: both
// can jump, and a reboot resets nothing in them.
package bootclock
