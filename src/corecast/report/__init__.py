"""corecast.report"""
