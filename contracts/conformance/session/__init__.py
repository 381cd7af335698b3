"""What a check works with: the suite context, the backend instances and host pools it builds, the pages it
writes, the calls it makes (under the run's deadline, each recorded) and the objects it hands over."""
