"""corecast.sched"""
