"""corecast.model"""
