"""corecast.meters"""
