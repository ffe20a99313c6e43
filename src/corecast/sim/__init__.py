"""corecast.sim"""
