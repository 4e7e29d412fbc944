import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { inputSafetySuite } from "../suites/input-safety.suite";

inputSafetySuite(useHarness(postgresHarness));
