package controlplane

// InTransit is inTransit, for the external tests: a command announced this
// long ago waits for a slot.
const InTransit = inTransit
