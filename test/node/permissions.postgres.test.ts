import { useHarness } from "../support/harness";
import { postgresHarness } from "../support/node-harness";
import { permissionsSuite } from "../suites/permissions.suite";

permissionsSuite(useHarness(postgresHarness));
