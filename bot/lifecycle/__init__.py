"""The decision lifecycle, by concern; bot/service.py composes it into `ApprovalService`.

- base.py: the service's state and caches (compiled policies, frozen runs, origin claims)
- writes.py: what a park and an ending write besides the row (the clock loop uses it too)
- runs.py: declaring, stopping, abandoning and retrying runs
- calls.py: appending a call (the engine's verdict, parking)
- review.py: a person's approve or deny of a parked call
- quorum.py: several approvers (requirements declared, reviews counted, who may still approve)
- learn.py: edit before approve, approve always (learned rules), the decision log
- questions.py: answering or declining a question
- withdraw.py: the agent that stopped waiting withdraws its parked call or question
- executors.py: an application's executors
- reading.py: reads and long-poll waiting
"""
