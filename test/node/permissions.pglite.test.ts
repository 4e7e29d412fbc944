import { useHarness } from "../support/harness";
import { pgliteHarness } from "../support/node-harness";
import { permissionsSuite } from "../suites/permissions.suite";

permissionsSuite(useHarness(pgliteHarness));
