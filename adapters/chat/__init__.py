"""What every chat platform shares: delivering decisions as messages (claimed, exactly once),
showing endings and nudges, turning presses and typed text into core calls, opaque button ids
and multi-select state. A platform plugs in through the small `Platform` port (port.py); this
package imports no chat library."""
