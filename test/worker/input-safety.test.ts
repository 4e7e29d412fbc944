import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { inputSafetySuite } from "../suites/input-safety.suite";

inputSafetySuite(useHarness(workerHarness));
