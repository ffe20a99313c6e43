"""corecast.collect"""
