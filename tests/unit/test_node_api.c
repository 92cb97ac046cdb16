/*
 * test_node_api.c - who may ask what on a replica (raftd/node_api.h node_api_permit()),
 * table-driven: every operation, asked with no caller, by a user, by an operator and by
 * an agent. No caller: only a Ping (UNAUTHENTICATED otherwise). Node, registration,
 * membership and transfer operations and a token for someone else: operators only
 * (DENIED), registration also by an agent. Reads and job writes: any authenticated
 * caller (job ownership is the state machine's, tested in test_fsm.c).
 */
#include "check_run.h"
#include "node_api.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#define OK     SPUR__API__CODE__CODE_OK
#define UNAUTH SPUR__API__CODE__CODE_UNAUTHENTICATED
#define DENIED SPUR__API__CODE__CODE_DENIED

enum who { NOBODY, USER, OPERATOR, AGENT_USER };

struct permit_row {
    const char *what;
    Spur__Api__Request__OpCase op;
    int want[4]; /* by enum who */
};

#define OPC(x) SPUR__API__REQUEST__OP_##x

static const struct permit_row rows[] = {
    {"ping", OPC(PING), {OK, OK, OK, OK}},
    {"raft_status", OPC(RAFT_STATUS), {UNAUTH, OK, OK, OK}},
    {"get_jobs", OPC(GET_JOBS), {UNAUTH, OK, OK, OK}},
    {"get_job", OPC(GET_JOB), {UNAUTH, OK, OK, OK}},
    {"get_nodes", OPC(GET_NODES), {UNAUTH, OK, OK, OK}},
    {"get_partitions", OPC(GET_PARTITIONS), {UNAUTH, OK, OK, OK}},
    {"submit_job", OPC(SUBMIT_JOB), {UNAUTH, OK, OK, OK}},
    {"cancel_job", OPC(CANCEL_JOB), {UNAUTH, OK, OK, OK}},
    {"cancel_jobs", OPC(CANCEL_JOBS), {UNAUTH, OK, OK, OK}},
    {"hold_job", OPC(HOLD_JOB), {UNAUTH, OK, OK, OK}},
    {"release_job", OPC(RELEASE_JOB), {UNAUTH, OK, OK, OK}},
    {"signal_job", OPC(SIGNAL_JOB), {UNAUTH, OK, OK, OK}},
    {"update_node", OPC(UPDATE_NODE), {UNAUTH, DENIED, OK, DENIED}},
    {"register_node", OPC(REGISTER_NODE), {UNAUTH, DENIED, OK, OK}},
    {"transfer_leader", OPC(TRANSFER_LEADER), {UNAUTH, DENIED, OK, DENIED}},
    {"add_learner", OPC(ADD_LEARNER), {UNAUTH, DENIED, OK, DENIED}},
    {"promote", OPC(PROMOTE), {UNAUTH, DENIED, OK, DENIED}},
    {"remove", OPC(REMOVE), {UNAUTH, DENIED, OK, DENIED}},
    {"token for oneself", OPC(TOKEN), {UNAUTH, OK, OK, OK}},
    {"no operation", OPC(_NOT_SET), {UNAUTH, OK, OK, OK}},
};

/*
 * The caller of each column. AGENT_USER is a non-operator whose method is "agent": a real
 * agent connection is an operator (a cluster member), so this isolates the one rule that
 * reads the method.
 */
static void caller_for(enum who w, Spur__Api__Caller *c)
{
    spur__api__caller__init(c);
    switch (w) {
    case USER:
        c->user = "alice";
        c->uid = 1001;
        c->method = "munge";
        break;
    case OPERATOR:
        c->user = "root";
        c->operator_ = true;
        c->method = "socket";
        break;
    case AGENT_USER:
        c->user = "spur:agent";
        c->method = "agent";
        break;
    case NOBODY:
        break;
    }
}

START_TEST(test_permit_table)
{
    const struct permit_row *r = &rows[_i];
    Spur__Api__TokenRequest tok = SPUR__API__TOKEN_REQUEST__INIT;
    for (int w = NOBODY; w <= AGENT_USER; w++) {
        Spur__Api__Request req = SPUR__API__REQUEST__INIT;
        Spur__Api__Caller c;
        caller_for((enum who)w, &c);
        req.caller = w == NOBODY ? NULL : &c;
        req.user = "root"; /* the client's claim: never looked at */
        req.op_case = r->op;
        if (r->op == OPC(TOKEN))
            req.token = &tok;
        int got = node_api_permit(&req);
        ck_assert_msg(got == r->want[w], "%s by caller %d: %d, want %d", r->what, w, got,
                      r->want[w]);
    }
}
END_TEST

/* scontrol token username=X: for oneself anyone, for another user operators only. */
START_TEST(test_permit_token_for_another)
{
    Spur__Api__TokenRequest tok = SPUR__API__TOKEN_REQUEST__INIT;
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    req.op_case = OPC(TOKEN);
    req.token = &tok;
    Spur__Api__Caller c;
    caller_for(USER, &c);
    req.caller = &c;
    tok.username = "alice";
    ck_assert_int_eq(node_api_permit(&req), OK);
    tok.username = "bob";
    ck_assert_int_eq(node_api_permit(&req), DENIED);
    caller_for(OPERATOR, &c);
    ck_assert_int_eq(node_api_permit(&req), OK);
    req.caller = NULL;
    ck_assert_int_eq(node_api_permit(&req), UNAUTH);
}
END_TEST

/* An operator flag is what counts, not the name: a user called root is still a user. */
START_TEST(test_permit_name_is_not_operator)
{
    Spur__Api__Request req = SPUR__API__REQUEST__INIT;
    Spur__Api__UpdateNodeRequest u = SPUR__API__UPDATE_NODE_REQUEST__INIT;
    req.op_case = OPC(UPDATE_NODE);
    req.update_node = &u;
    Spur__Api__Caller c = SPUR__API__CALLER__INIT;
    c.user = "root";
    c.uid = 0;
    c.method = "token";
    req.caller = &c;
    ck_assert_int_eq(node_api_permit(&req), DENIED);
    c.operator_ = true;
    ck_assert_int_eq(node_api_permit(&req), OK);
}
END_TEST

static Suite *node_api_suite(void)
{
    Suite *s = suite_create("node_api");
    TCase *tc = check_case(
        s, "permit",
        (const TTest *[]){test_permit_token_for_another, test_permit_name_is_not_operator, NULL});
    tcase_add_loop_test(tc, test_permit_table, 0, sizeof(rows) / sizeof(rows[0]));
    return s;
}

int main(void)
{
    return check_run(node_api_suite());
}
