// The BFF's own answers are exact (the document closes them): no member to invent.
import { createClient } from "@fintech-bff/client";

const bff = createClient({ mode: "cookie" });
const me = await bff.session();
if (me) console.log(me.roles); // error TS2339
