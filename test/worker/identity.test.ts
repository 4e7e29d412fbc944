import { useHarness } from "../support/harness";
import { workerHarness } from "../support/worker-harness";
import { identitySuite } from "../suites/identity.suite";

identitySuite(useHarness(workerHarness));
