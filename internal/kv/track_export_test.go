package kv

// TrackCheckEvery is how often Track's receive wakes at least.
const TrackCheckEvery = trackCheckEvery
