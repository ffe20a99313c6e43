"""The enforcing mode of `corecast sched`: a user-space scheduler that applies a policy to real
programs with sched_setaffinity every quantum (`runner`), on a hybrid machine found in sysfs
(`hybrid`) or on an emulated one whose "small" CPUs are slowed (`emulate`).

This is the one part of corecast.sched that reads /proc and sysfs and changes the system; the
simulator never imports it.
"""
