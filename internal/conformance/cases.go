package conformance

// Cases lists every behaviour of the suite. Guarantees (docs/ARCHITECTURE.md, "Guarantees and their tests"):
// 1 atomic enqueue, 2 per-partition order, 3 at-least-once / exactly-once
// effects, 4 no loss on crash, 5 one active processor per partition,
// 6 bad input writes nothing, 7 bounded storage.
func Cases() []Case {
	return []Case{
		{"AtomicEnqueue", testAtomicEnqueue},                                                 // 1
		{"EnqueueConnKinds", testEnqueueConnKinds},                                           // 1
		{"EnqueueBatchChunked", testEnqueueBatchChunked},                                     // 1, 2
		{"EnqueueBatchOneChunk", testEnqueueBatchOneChunk},                                   // 1, 2
		{"CallerOwnedTxPickedUpPromptly", testCallerOwnedTxPickedUpPromptly},                 // 1
		{"ProducerOnlyInstanceConsumedElsewhere", testProducerOnlyInstanceConsumedElsewhere}, // 1, 5
		{"PerPartitionOrder", testPerPartitionOrder},                                         // 2
		{"OverlappingTransactionsNeverSkipped", testOverlappingTransactionsNeverSkipped},     // 2
		{"SequenceMoveBatches", testSequenceMoveBatches},                                     // 2
		{"LateCommitMovedAfterLaterRows", testLateCommitMovedAfterLaterRows},                 // 2
		{"SequenceMoveMany", testSequenceMoveMany},                                           // 2
		{"SeqsContinueAfterPrune", testSeqsContinueAfterPrune},                               // 2
		{"LeaseGroup", testLeaseGroup},                                                       // 3, 5
		{"LeaseGroupOwnParams", testLeaseGroupOwnParams},                                     // 3, 5
		{"AtLeastOnceRetry", testAtLeastOnceRetry},                                           // 3
		{"RejectDeadLetters", testRejectDeadLetters},
		{"DeadLetterReplayInOrder", testDeadLetterReplayInOrder}, // 2, 3
		{"DeadLetterActions", testDeadLetterActions},
		{"DeadLetterOperatorsRace", testDeadLetterOperatorsRace}, // 3
		{"DeadLetterIDs", testDeadLetterIDs},
		{"DeadLetterBulkConditional", testDeadLetterBulkConditional},
		{"MaxAttemptsDeadLetters", testMaxAttemptsDeadLetters},           // 3
		{"ParkStopsPartitionAndResume", testParkStopsPartitionAndResume}, // 2
		{"ParkSkip", testParkSkip},                                       // 2
		{"ParkAcrossRestart", testParkAcrossRestart},                     // 2, 4
		{"ParkTransactional", testParkTransactional},                     // 2, 3
		{"ParkOperatorsRace", testParkOperatorsRace},
		{"PartitionRetryNow", testPartitionRetryNow},                           // 2
		{"PartitionSkipRetrying", testPartitionSkipRetrying},                   // 2
		{"PartitionBusyRefused", testPartitionBusyRefused},                     // 3
		{"PartitionAdminWaitsForDelivery", testPartitionAdminWaitsForDelivery}, // 3
		{"PartitionConditionalAndMessages", testPartitionConditionalAndMessages},
		{"TypedHandlersAndMiddleware", testTypedHandlersAndMiddleware}, // 3, 6
		{"DeliveryKey", testDeliveryKey},
		{"DedupKeys", testDedupKeys}, // 1, 6
		{"DedupRace", testDedupRace},
		{"EnqueueHeadersHook", testEnqueueHeadersHook},
		{"NestedWrites", testNestedWrites},
		{"PurgeLeased", testPurgeLeased},
		{"PurgeTransactional", testPurgeTransactional},
		{"PurgeRacesLease", testPurgeRacesLease},
		{"WakeupsAcrossProcesses", testWakeupsAcrossProcesses},                       // 1                                             // 1, 6
		{"PanicIsRetried", testPanicIsRetried},                                       // 3
		{"BatchSizeFallsToOneAndRecovers", testBatchSizeFallsToOneAndRecovers},       // 3
		{"LeasedBatchPartialAck", testLeasedBatchPartialAck},                         // 3
		{"TransactionalExactlyOnce", testTransactionalExactlyOnce},                   // 3
		{"TransactionalRejectAndMaxAttempts", testTransactionalRejectAndMaxAttempts}, // 3
		{"CrashedLeaseIsRedelivered", testCrashedLeaseIsRedelivered},                 // 4
		{"StopDrainsInFlight", testStopDrainsInFlight},                               // 4
		{"StopReleasesLeases", testStopReleasesLeases},                               // 4, 5
		{"ConcurrencyTorture", testConcurrencyTorture},                               // 1, 2, 3, 5, 7
		{"CrashRestartNothingLost", testCrashRestartNothingLost},                     // 1, 2, 3, 4
		{"ConnectionFaultsNothingLost", testConnectionFaultsNothingLost},             // 1, 2, 3, 4
		{"BadInputWritesNothing", testBadInputWritesNothing},                         // 6
		{"HeadersExactOrRefused", testHeadersExactOrRefused},                         // 6
		{"NilConnRefused", testNilConnRefused},                                       // 6
		{"HandlerErrorTextAnyBytes", testHandlerErrorTextAnyBytes},                   // 3
		{"LeasedBatchOutcomeWithHostileText", testLeasedBatchOutcomeWithHostileText}, // 3
		{"QueueDefaultsEveryQueue", testQueueDefaultsEveryQueue},
		{"ConfigErrorsAllAtOnce", testConfigErrorsAllAtOnce},
		{"StopReturnsWhenContextEnds", testStopReturnsWhenContextEnds}, // 4
		{"StatementsReleasedOnStop", testStatementsReleasedOnStop},
		{"QueryHooksSeeProcessor", testQueryHooksSeeProcessor},
		{"AsyncCommits", testAsyncCommits},
		{"VacuumBoundsStorage", testVacuumBoundsStorage}, // 7
		{"TableVacuum", testTableVacuum},                 // 7
		{"RotationNothingLost", testRotationNothingLost}, // 1, 2, 7
		{"StatsReportsBacklog", testStatsReportsBacklog},
		{"RegistrationIdempotent", testRegistrationIdempotent},
		{"RegistrationMaxPartitions", testRegistrationMaxPartitions},
		{"RegistrationConcurrent", testRegistrationConcurrent},
		{"FailedStartRegistersNothing", testFailedStartRegistersNothing},
		{"StartWithoutSchema", testStartWithoutSchema},
		{"StartWaitsForDatabase", testStartWaitsForDatabase},
	}
}
